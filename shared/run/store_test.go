package run_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

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
		from, err := run.Claim(ctx, pool, id)
		require.NoError(t, err)
		require.Equal(t, run.Queued, from)
		from, err = run.Transition(ctx, pool, id, run.Completed, run.Change{Output: []byte(`{"text":"hi"}`)})
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
		from, err := run.Transition(ctx, pool, id, run.Running, run.Change{Output: []byte(`{"x":1}`)})
		var te *run.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, run.Completed, from)
		var output *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT output::text FROM runs WHERE id = $1`, id).Scan(&output))
		require.Nil(t, output)
		_, err = run.Claim(ctx, pool, id)
		require.ErrorAs(t, err, &te)
	})

	t.Run("a run with a cancellation pending is not claimed", func(t *testing.T) {
		id := newRun(t, pool, run.Queued)
		_, err := pool.Exec(ctx, `UPDATE runs SET cancel_requested_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = run.Claim(ctx, pool, id)
		var te *run.TransitionError
		require.ErrorAs(t, err, &te)
		var status string
		var attempts int
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts FROM runs WHERE id = $1`, id).Scan(&status, &attempts))
		require.Equal(t, "queued", status)
		require.Zero(t, attempts)
	})

	t.Run("a re-delivered task may claim a running run again", func(t *testing.T) {
		id := newRun(t, pool, run.Running)
		from, err := run.Claim(ctx, pool, id)
		require.NoError(t, err)
		require.Equal(t, run.Running, from)
	})

	t.Run("a missing run is ErrNotFound", func(t *testing.T) {
		_, err := run.Transition(ctx, pool, uuid.NewString(), run.Cancelled, run.Change{})
		require.ErrorIs(t, err, run.ErrNotFound)
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
