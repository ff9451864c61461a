package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// Expired is a run paused for approval that ExpireApprovals ended as timed_out.
type Expired struct {
	RunID, OrgID string
	// ChainID is the run's chain when it is a chain step ("" otherwise): the coordinator
	// must be told the step ended.
	ChainID string
	// Event is the run's journaled terminal event (job:failed with status timed_out).
	Event event.Envelope
}

// ExpireApprovals ends as timed_out, with the error APPROVAL_TIMEOUT and its terminal
// event, every run paused for approval (pending_review) whose approval deadline is before
// now — at most 500 per call — in one statement; runID, when not empty, limits it to that
// run. now is the caller's clock (tests pass a time after the deadline rather than wait).
// A run another transaction holds is skipped.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time, runID string) ([]Expired, error) {
	if !run.CanTransition(run.PendingReview, run.TimedOut) {
		return nil, &TransitionError{RunID: runID, From: run.PendingReview, To: run.TimedOut, Illegal: true}
	}
	errBody, err := json.Marshal(map[string]any{"code": apierr.CodeApprovalTimeout,
		"message": "nobody approved or rejected the paused tool call before the skill's autonomous.approval_timeout",
		"at":      now.UTC()})
	if err != nil {
		return nil, err
	}
	var id *string
	if runID != "" {
		id = &runID
	}
	data, err := json.Marshal(map[string]any{"status": run.TimedOut, "error": json.RawMessage(errBody)})
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, expireApprovalsSQL, now, errBody, id, event.JobFailed, data)
	if err != nil {
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Expired, error) {
		var x Expired
		err := row.Scan(&x.RunID, &x.OrgID, &x.Event.Seq, &x.Event.TS, &x.ChainID)
		x.Event.Type, x.Event.JobID, x.Event.OrgID, x.Event.Data = event.JobFailed, x.RunID, x.OrgID, data
		return x, err
	})
}
