package handoff

import (
	"context"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// replicas returns two stores on one Redis, as two router replicas would have.
func replicas(t *testing.T, opts Options) (*Store, *Store, Pair) {
	t.Helper()
	_, rdb := testkit.Redis(t)
	a, b := New(rdb, slog.New(slog.DiscardHandler), opts), New(rdb, slog.New(slog.DiscardHandler), opts)
	require.NoError(t, a.Start(context.Background()))
	return a, b, Pair{OrgID: "org", JobID: rand.Text(), Step: "iter/1/llm"}
}

// A claim is renewed while its call runs, however long: a second call keeps waiting.
func TestClaimIsRenewedWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	a, b, p := replicas(t, Options{ClaimTTL: 150 * time.Millisecond})
	ctx := context.Background()
	first, err := a.Begin(ctx, p, time.Now().Add(time.Second), "")
	require.NoError(t, err)
	require.NotNil(t, first.Call)
	defer first.Call.Close(ctx)

	_, err = b.Begin(ctx, p, time.Now().Add(600*time.Millisecond), "")
	require.ErrorIs(t, err, ErrInFlight, "four claim TTLs later the first call still holds the pair")
}

// A claim whose replica died (no renewal, no release) is taken over once it expires.
func TestClaimOfADeadReplicaIsTakenOver(t *testing.T) {
	t.Parallel()
	a, b, p := replicas(t, Options{ClaimTTL: 200 * time.Millisecond})
	ctx := context.Background()
	first, err := a.Begin(ctx, p, time.Now().Add(time.Second), "")
	require.NoError(t, err)
	first.Call.closed.Store(true) // the replica dies: its timer renews nothing more
	first.Call.renewal.Stop()

	second, err := b.Begin(ctx, p, time.Now().Add(5*time.Second), "")
	require.NoError(t, err)
	require.NotNil(t, second.Call)
	require.True(t, second.Waited)
	second.Call.Close(ctx)
}

// A finished call's answer is handed to the next call of the pair; the claim is gone.
func TestFinishedAnswerIsHandedOver(t *testing.T) {
	t.Parallel()
	a, b, p := replicas(t, Options{})
	ctx := context.Background()
	first, err := a.Begin(ctx, p, time.Now().Add(time.Second), "")
	require.NoError(t, err)
	pipe := a.rdb.Pipeline()
	first.Call.Finish(ctx, []byte(`{"answer":1}`))(pipe)
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	first.Call.Close(ctx)

	again, err := b.Begin(ctx, p, time.Now().Add(time.Second), "")
	require.NoError(t, err)
	require.Nil(t, again.Call)
	require.JSONEq(t, `{"answer":1}`, string(again.Answer))
	_, claim, _ := keys(p)
	require.ErrorIs(t, a.rdb.Get(ctx, claim).Err(), redis.Nil)
}

// A call whose replica died mid-call is handed, once, to the call that takes the pair over
// as cut off (it may have been paid); calls that finished or failed are not.
func TestCutOffCallIsHandedToTheTakeOver(t *testing.T) {
	t.Parallel()
	a, b, p := replicas(t, Options{ClaimTTL: 200 * time.Millisecond})
	ctx := context.Background()

	failed, err := a.Begin(ctx, p, time.Now().Add(time.Second), "")
	require.NoError(t, err)
	require.Empty(t, failed.CutOff)
	failed.Call.Close(ctx) // no answer: released, nothing paid

	const span = "0b6f7f4e-8a5d-4a52-9c1e-2f3d4c5b6a79"
	dead, err := a.Begin(ctx, p, time.Now().Add(time.Second), span)
	require.NoError(t, err)
	require.Empty(t, dead.CutOff, "a released call is not cut off")
	dead.Call.closed.Store(true) // the replica dies mid-call
	dead.Call.renewal.Stop()

	taker, err := b.Begin(ctx, p, time.Now().Add(5*time.Second), "")
	require.NoError(t, err)
	require.Equal(t, []string{dead.Call.Token()}, taker.CutOff)
	require.Equal(t, span, Label(taker.CutOff[0]), "the cut-off call's label comes with its token")
	require.Empty(t, Label(taker.Call.Token()))
	taker.Call.closed.Store(true) // this one dies too, before it recorded the cut-off call
	taker.Call.renewal.Stop()

	next, err := a.Begin(ctx, p, time.Now().Add(5*time.Second), "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{dead.Call.Token(), taker.Call.Token()}, next.CutOff,
		"a cut-off call stays open until recorded")
	pipe := a.rdb.Pipeline()
	for _, tok := range next.CutOff {
		a.CloseCutOff(ctx, p, tok)(pipe)
	}
	next.Call.Finish(ctx, []byte(`{"answer":1}`))(pipe)
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	next.Call.Close(ctx)

	_, _, open := keys(p)
	n, err := a.rdb.Exists(ctx, open).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing left open once recorded and answered")
}
