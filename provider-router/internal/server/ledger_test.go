package server_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
)

// ledgerRows counts the usage-ledger rows of the bundle's organisation.
func (b *bundle) ledgerRows() int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM usage_ledger WHERE org_id = $1`, b.orgID).Scan(&n))
	return n
}

// monthlyTokens is the organisation's org_monthly_usage counter (all months).
func (b *bundle) monthlyTokens() int64 {
	b.t.Helper()
	var n int64
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(tokens), 0) FROM org_monthly_usage WHERE org_id = $1`, b.orgID).Scan(&n))
	return n
}

// A Postgres outage of several seconds under a stream of calls loses no usage-ledger row:
// the ledger's connection is cut (a TCP proxy; the shared test Postgres keeps running)
// while calls go on being answered, and once it is back every answered call has its row
// and the monthly counter holds their tokens, counted once.
func TestLedgerSurvivesPostgresOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, options{ledgerProxy: true})
	var answered, tokens atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, out := b.chat(b.headers(), simpleBody)
				if code != http.StatusOK {
					t.Errorf("call failed: %d %v", code, out)
					return
				}
				tokens.Add(int64(out["usage"].(map[string]any)["total_tokens"].(float64)))
				answered.Add(1)
			}
		})
	}
	waitAnswered := func(n int64) {
		t.Helper()
		require.Eventually(t, func() bool { return answered.Load() >= n || t.Failed() }, 30*time.Second, 5*time.Millisecond)
	}
	waitAnswered(20)
	b.pgProxy.Cut()
	cutAt, outage := answered.Load(), time.Now()
	waitAnswered(cutAt + 100)
	require.Eventually(t, func() bool { return time.Since(outage) > 3*time.Second }, 10*time.Second, 50*time.Millisecond)
	b.pgProxy.Restore()
	waitAnswered(answered.Load() + 20)
	close(stop)
	wg.Wait()
	require.False(t, t.Failed())

	want := answered.Load()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if n, err := ledger.Backlog(context.Background(), b.rdb); err == nil && n == 0 && int64(b.ledgerRows()) >= want {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the ledger until its mover caught up, or the deadline
	}
	require.EqualValues(t, want, b.ledgerRows(), "every answered call has one ledger row (%d answered during the outage)",
		answered.Load()-cutAt)
	require.Equal(t, tokens.Load(), b.monthlyTokens(), "the monthly counter holds every call's tokens once")
}
