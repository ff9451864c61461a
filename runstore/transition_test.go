package runstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func newRun(t *testing.T, pool *pgxpool.Pool, status run.Status) string {
	t.Helper()
	id, _ := testkit.NewRun(t, pool, string(status))
	return id
}

func TestTransition(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()

	t.Run("legal transitions move and stamp the run", func(t *testing.T) {
		id := newRun(t, pool, run.Queued)
		from, err := runstore.New(pool).Claim(ctx, id)
		require.NoError(t, err)
		require.Equal(t, run.Queued, from)
		from, err = runstore.New(pool).Transition(ctx, id, nil, run.Completed, runstore.Change{Output: []byte(`{"text":"hi"}`)})
		require.NoError(t, err)
		require.Equal(t, run.Running, from)
		var status string
		var attempts int
		var finished bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts, finished_at IS NOT NULL FROM runs WHERE id = $1`, id).
			Scan(&status, &attempts, &finished))
		require.Equal(t, "completed", status)
		require.Equal(t, 1, attempts)
		require.True(t, finished)
	})

	t.Run("an illegal transition is an error and writes nothing", func(t *testing.T) {
		id := newRun(t, pool, run.Completed)
		from, err := runstore.New(pool).Transition(ctx, id, nil, run.Running, runstore.Change{Output: []byte(`{"x":1}`)})
		var te *runstore.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, run.Completed, from)
		var output *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT output::text FROM runs WHERE id = $1`, id).Scan(&output))
		require.Nil(t, output)
		_, err = runstore.New(pool).Claim(ctx, id)
		require.ErrorAs(t, err, &te)
	})

	t.Run("a run with a cancellation pending is not claimed", func(t *testing.T) {
		id := newRun(t, pool, run.Queued)
		_, err := pool.Exec(ctx, `UPDATE runs SET cancel_requested_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = runstore.New(pool).Claim(ctx, id)
		var te *runstore.TransitionError
		require.ErrorAs(t, err, &te)
		var status string
		var attempts int
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts FROM runs WHERE id = $1`, id).Scan(&status, &attempts))
		require.Equal(t, "queued", status)
		require.Zero(t, attempts)
	})

	t.Run("a re-delivered task may claim a running run again", func(t *testing.T) {
		id := newRun(t, pool, run.Running)
		from, err := runstore.New(pool).Claim(ctx, id)
		require.NoError(t, err)
		require.Equal(t, run.Running, from)
	})

	t.Run("started_at is when the first claiming handler started", func(t *testing.T) {
		id := newRun(t, pool, run.Queued)
		handlerStart := time.Now().Add(-3 * time.Second).Truncate(time.Microsecond)
		_, prev, ok, err := runstore.New(pool).ClaimWork(ctx, id, handlerStart)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, run.Queued, prev)
		// A resumed attempt keeps the run's first start.
		_, prev, ok, err = runstore.New(pool).ClaimWork(ctx, id, time.Now())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, run.Running, prev)
		var started time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT started_at FROM runs WHERE id = $1`, id).Scan(&started))
		require.True(t, handlerStart.Equal(started), "started_at %s, handler started %s", started, handlerStart)
	})

	t.Run("a missing run is ErrNotFound", func(t *testing.T) {
		_, err := runstore.New(pool).Transition(ctx, uuid.NewString(), nil, run.Cancelled, runstore.Change{})
		require.ErrorIs(t, err, runstore.ErrNotFound)
	})
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	for _, s := range []run.Status{run.Completed, run.Failed, run.Cancelled, run.Rejected, run.Skipped, run.TimedOut} {
		require.True(t, s.Terminal(), s)
	}
	for _, s := range []run.Status{run.Queued, run.Running, run.HeldForReview, run.PendingReview} {
		require.False(t, s.Terminal(), s)
	}
	require.False(t, run.Status("bogus").Valid())
	require.True(t, run.CanTransition(run.HeldForReview, run.Queued))
	require.False(t, run.CanTransition(run.Completed, run.Queued))
}

func TestQueueTransitionJournalsEventsOnlyWhenTheRunMoves(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	done, err := event.NewDraft(event.JobCompleted, map[string]any{"status": "completed"})
	require.NoError(t, err)
	span, err := event.NewDraft(event.JobSpan, map[string]any{"id": "s1"})
	require.NoError(t, err)
	eventCount := func(id string) (n, seq int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM run_events WHERE run_id = $1), event_seq
			FROM runs WHERE id = $1`, id).Scan(&n, &seq))
		return n, seq
	}

	t.Run("a run that moves gets its events, numbered after its last", func(t *testing.T) {
		id, orgID := testkit.NewRun(t, pool, "running")
		_, err := runstore.New(pool).RecordEvent(ctx, id, orgID, event.JobStarted, map[string]any{})
		require.NoError(t, err)
		b := &pgx.Batch{}
		out, err := runstore.QueueTransition(b, id, nil, run.Completed, runstore.Change{Output: []byte(`{"text":"hi"}`)}, []event.Draft{span, done})
		require.NoError(t, err)
		require.NoError(t, pool.SendBatch(ctx, b).Close())
		require.True(t, out.Moved)
		require.Equal(t, run.Running, out.From)
		require.Len(t, out.Events, 2)
		require.Equal(t, event.JobSpan, out.Events[0].Type)
		require.EqualValues(t, 2, out.Events[0].Seq)
		require.Equal(t, event.JobCompleted, out.Events[1].Type)
		require.EqualValues(t, 3, out.Events[1].Seq)
		require.Equal(t, orgID, out.Events[1].OrgID)
		n, seq := eventCount(id)
		require.Equal(t, 3, n)
		require.Equal(t, 3, seq)
		got, err := runstore.New(pool).Replay(ctx, orgID, id, 1)
		require.NoError(t, err)
		require.Equal(t, out.Events[1].Type, got[1].Type)
		require.JSONEq(t, `{"status":"completed"}`, string(got[1].Data))
		var status string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, id).Scan(&status))
		require.Equal(t, "completed", status)
	})

	t.Run("a run that may not move writes nothing, events included", func(t *testing.T) {
		id, _ := testkit.NewRun(t, pool, "cancelled")
		b := &pgx.Batch{}
		out, err := runstore.QueueTransition(b, id, nil, run.Completed, runstore.Change{Output: []byte(`{"x":1}`)}, []event.Draft{span, done})
		require.NoError(t, err)
		require.NoError(t, pool.SendBatch(ctx, b).Close())
		require.False(t, out.Moved)
		require.Empty(t, out.Events)
		n, seq := eventCount(id)
		require.Zero(t, n)
		require.Zero(t, seq)
		from, err := runstore.New(pool).Refused(ctx, id, run.Completed)
		var te *runstore.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, run.Cancelled, from)
	})

	t.Run("no events: only the move", func(t *testing.T) {
		id, _ := testkit.NewRun(t, pool, "running")
		b := &pgx.Batch{}
		out, err := runstore.QueueTransition(b, id, nil, run.Failed, runstore.Change{Error: []byte(`{"code":"X"}`)}, nil)
		require.NoError(t, err)
		require.NoError(t, pool.SendBatch(ctx, b).Close())
		require.True(t, out.Moved)
		require.Empty(t, out.Events)
		n, seq := eventCount(id)
		require.Zero(t, n)
		require.Zero(t, seq)
	})
}
