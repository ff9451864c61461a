package runstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// The approval deadline is judged by the caller's clock: the test passes times either side
// of it instead of waiting.
func TestExpireApprovals(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)

	pause := func(t *testing.T, timeout time.Duration) (string, time.Time) {
		t.Helper()
		id := newRun(t, pool, run.Running)
		_, err := s.Transition(ctx, id, []run.Status{run.Running}, run.PendingReview, runstore.Change{ApprovalTimeout: timeout})
		require.NoError(t, err)
		var deadline *time.Time
		var now time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT approval_deadline, now() FROM runs WHERE id = $1`, id).Scan(&deadline, &now))
		if timeout == 0 {
			require.Nil(t, deadline)
			return id, time.Time{}
		}
		require.NotNil(t, deadline)
		require.WithinDuration(t, now.Add(timeout), *deadline, time.Minute)
		return id, *deadline
	}

	t.Run("a pause past its deadline ends timed_out with its event; before it, nothing", func(t *testing.T) {
		id, deadline := pause(t, 72*time.Hour)
		got, err := s.ExpireApprovals(ctx, deadline.Add(-time.Second), "")
		require.NoError(t, err)
		for _, x := range got {
			require.NotEqual(t, id, x.RunID)
		}
		var status string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, id).Scan(&status))
		require.Equal(t, "pending_review", status)

		got, err = s.ExpireApprovals(ctx, deadline.Add(time.Second), "")
		require.NoError(t, err)
		var mine *runstore.Expired
		for i := range got {
			if got[i].RunID == id {
				mine = &got[i]
			}
		}
		require.NotNil(t, mine, "the run past its deadline is expired")
		var code string
		var finished bool
		var attempts int
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, error->>'code', finished_at IS NOT NULL,
			jsonb_array_length(attempt_errors) FROM runs WHERE id = $1`, id).Scan(&status, &code, &finished, &attempts))
		require.Equal(t, "timed_out", status)
		require.Equal(t, apierr.CodeApprovalTimeout, code)
		require.True(t, finished)
		require.Equal(t, 1, attempts)

		// The terminal event is journaled with the number the envelope carries.
		require.Equal(t, event.JobFailed, mine.Event.Type)
		var typ string
		var data []byte
		require.NoError(t, pool.QueryRow(ctx, `SELECT type, data FROM run_events WHERE run_id = $1 AND seq = $2`,
			id, mine.Event.Seq).Scan(&typ, &data))
		require.Equal(t, event.JobFailed, typ)
		var d struct {
			Status string                `json:"status"`
			Error  struct{ Code string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(data, &d))
		require.Equal(t, "timed_out", d.Status)
		require.Equal(t, apierr.CodeApprovalTimeout, d.Error.Code)
		require.JSONEq(t, string(data), string(mine.Event.Data))

		// Once ended, a later sweep leaves it alone.
		got, err = s.ExpireApprovals(ctx, deadline.Add(time.Hour), id)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("a pause without a timeout never expires", func(t *testing.T) {
		id, _ := pause(t, 0)
		got, err := s.ExpireApprovals(ctx, time.Now().Add(10000*time.Hour), id)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("a run id limits the sweep to that run", func(t *testing.T) {
		a, deadline := pause(t, time.Hour)
		b, _ := pause(t, time.Hour)
		got, err := s.ExpireApprovals(ctx, deadline.Add(time.Hour), b)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, b, got[0].RunID)
		var status string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, a).Scan(&status))
		require.Equal(t, "pending_review", status)
	})

	t.Run("a second pause sets its own deadline", func(t *testing.T) {
		id, first := pause(t, time.Hour)
		_, err := s.Transition(ctx, id, []run.Status{run.PendingReview}, run.Queued, runstore.Change{})
		require.NoError(t, err)
		_, err = s.Claim(ctx, id)
		require.NoError(t, err)
		_, err = s.Transition(ctx, id, []run.Status{run.Running}, run.PendingReview, runstore.Change{})
		require.NoError(t, err)
		got, err := s.ExpireApprovals(ctx, first.Add(time.Hour), id)
		require.NoError(t, err)
		require.Empty(t, got, "the second pause has no timeout")
	})
}
