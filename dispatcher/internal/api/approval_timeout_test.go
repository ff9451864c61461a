package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// TestApprovalTimeout drives the approval deadline with the dispatcher's clock, never by
// waiting: the reconciler's sweep ends a pause past its deadline, and a decision that comes
// after the deadline but before the sweep loses to it.
func TestApprovalTimeout(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64 // unix nanoseconds; zero: the real clock
	b := setupWith(t, app.Options{Now: func() time.Time {
		if n := clock.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}})
	ctx := context.Background()
	approver := b.newKey(auth.RoleApprove)

	// paused dispatches a run and pauses it for approval as the executor does, with a
	// one-hour approval timeout; it returns the run and its deadline.
	paused := func() (string, time.Time) {
		t.Helper()
		code, res := b.dispatch(demo)
		require.Equal(t, http.StatusAccepted, code, "%v", res)
		id := res["jobId"].(string)
		s := runstore.New(b.pool)
		_, err := s.Claim(ctx, id)
		require.NoError(t, err)
		_, err = s.Transition(ctx, id, []run.Status{run.Running}, run.PendingReview, runstore.Change{ApprovalTimeout: time.Hour})
		require.NoError(t, err)
		var deadline time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT approval_deadline FROM runs WHERE id = $1`, id).Scan(&deadline))
		return id, deadline
	}
	ended := func(id string) {
		t.Helper()
		require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND status = 'timed_out'
			AND error->>'code' = $2 AND finished_at IS NOT NULL`, id, apierr.CodeApprovalTimeout))
		require.Equal(t, 1, b.count(`SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2
			AND data->>'status' = 'timed_out' AND data->'error'->>'code' = $3`, id, event.JobFailed, apierr.CodeApprovalTimeout))
	}

	t.Run("the sweep ends a pause past its deadline, not before", func(t *testing.T) {
		id, deadline := paused()
		clock.Store(deadline.Add(-time.Second).UnixNano())
		_, err := b.app.Reconciler.Once(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND status = 'pending_review'`, id))
		code, r := b.do(approver, http.MethodGet, "/api/v1/dispatch/"+id, "")
		require.Equal(t, http.StatusOK, code, "%v", r)
		shown, err := time.Parse(time.RFC3339Nano, r["approvalDeadline"].(string))
		require.NoError(t, err, "the paused run shows its deadline: %v", r)
		require.WithinDuration(t, deadline, shown, time.Millisecond)

		clock.Store(deadline.Add(time.Second).UnixNano())
		n, err := b.app.Reconciler.Once(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 1)
		ended(id)
		_, r = b.do(approver, http.MethodGet, "/api/v1/dispatch/"+id, "")
		require.NotContains(t, r, "approvalDeadline", "only a paused run has a deadline")

		code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"too late"}`)
		require.Equal(t, http.StatusConflict, code, "%v", res)
		require.Equal(t, apierr.CodeJobNotReviewable, res["code"])
	})

	t.Run("a decision after the deadline loses to it before any sweep", func(t *testing.T) {
		for _, decision := range []string{"approve", "reject"} {
			id, deadline := paused()
			clock.Store(deadline.Add(time.Second).UnixNano())
			code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/"+decision, `{"reason":"too late"}`)
			require.Equal(t, http.StatusConflict, code, "%s: %v", decision, res)
			require.Equal(t, apierr.CodeJobNotReviewable, res["code"])
			ended(id)
			require.Zero(t, b.count(`SELECT count(*) FROM reviews WHERE run_id = $1`, id), "no review recorded")
		}
	})

	t.Run("a decision before the deadline wins", func(t *testing.T) {
		id, deadline := paused()
		clock.Store(deadline.Add(-time.Second).UnixNano())
		code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"in time"}`)
		require.Equal(t, http.StatusOK, code, "%v", res)
		require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND status = 'queued'`, id))
		clock.Store(deadline.Add(time.Hour).UnixNano())
		_, err := b.app.Reconciler.Once(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND status = 'queued'`, id), "an approved run is not swept")
	})
}
