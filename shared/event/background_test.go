package event_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestBackgroundPublishesEverythingInOrderBeforeClose(t *testing.T) {
	t.Parallel()
	_, rdb := testkit.Redis(t)
	ctx := context.Background()
	orgID := uuid.NewString()
	sub := rdb.Subscribe(ctx, event.Channel(orgID))
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is live before anything is published
	require.NoError(t, err)
	messages := sub.Channel(redis.WithChannelSize(4096))

	bg := event.NewBackground(&event.Publisher{Redis: rdb}, slog.New(slog.DiscardHandler))
	const jobs, perJob = 8, 250
	var wg sync.WaitGroup
	for range jobs {
		job := uuid.NewString()
		wg.Go(func() {
			for seq := int64(1); seq <= perJob; seq++ {
				require.NoError(t, bg.Publish(ctx, event.Envelope{Type: event.JobProgress, JobID: job, OrgID: orgID,
					Seq: seq, Data: json.RawMessage(`{}`)}))
			}
		})
	}
	wg.Wait()
	bg.Close() // returns once everything handed in was sent…
	// …so a sentinel published now arrives after all of it.
	require.NoError(t, (&event.Publisher{Redis: rdb}).Publish(ctx, event.Envelope{Type: event.JobProgress,
		JobID: "sentinel", OrgID: orgID, Seq: 1, Data: json.RawMessage(`{}`)}))

	last := map[string]int64{}
	timeout := time.After(10 * time.Second)
	for n := 0; n < jobs*perJob; n++ {
		select {
		case m := <-messages:
			var env event.Envelope
			require.NoError(t, json.Unmarshal([]byte(m.Payload), &env))
			require.NotEqual(t, "sentinel", env.JobID, "an event was published after Close returned")
			require.Equal(t, last[env.JobID]+1, env.Seq, "a job's events arrive in the order published")
			last[env.JobID] = env.Seq
		case <-timeout:
			t.Fatalf("received %d of %d events", n, jobs*perJob)
		}
	}
}

func TestBackgroundPublishStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	_, rdb := testkit.Redis(t)
	bg := event.NewBackground(&event.Publisher{Redis: rdb}, slog.New(slog.DiscardHandler))
	defer bg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	envs := make([]event.Envelope, 10_000) // more than the queue holds: some wait, and stop waiting
	for i := range envs {
		envs[i] = event.Envelope{Type: event.JobProgress, JobID: "j", OrgID: "o", Seq: int64(i + 1), Data: json.RawMessage(`{}`)}
	}
	require.ErrorIs(t, bg.Publish(ctx, envs...), context.Canceled)
}
