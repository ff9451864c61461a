package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// Run is what a worker needs of a run row.
type Run struct {
	ID, OrgID, TraceID, JobType string
	Status                      run.Status
	Priority, Queue, UserID     string
	ExecutionType               string
	Payload                     json.RawMessage
	SkillVersion                int
	ChainID, ChainStep          string
	CostCeilingUSD              *float64
	Attempts                    int
	QueuedAt                    *time.Time
	CancelRequested             bool
	// DeadlineAt, when set, bounds the whole run across attempts (the task's timeout bounds
	// one attempt).
	DeadlineAt *time.Time
	// WaitingSince is when the run began waiting for its current call (parked at least once
	// since its last answer); ParkedAt and ParkReason, set by claimRun only, say when and
	// why the run was parked if this pickup ends a park.
	WaitingSince, ParkedAt *time.Time
	ParkReason             string
	// StartedAt is the run's first pickup; nil before it.
	StartedAt *time.Time
}

var errRunMissing = errors.New("run missing")

func loadRun(ctx context.Context, db run.DB, id string) (Run, error) {
	r, err := scanRun(db.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, errRunMissing
	}
	if err != nil {
		return r, fmt.Errorf("loading run %s: %w", id, err)
	}
	return r, nil
}

// runColumns are the columns scanRun reads, of a runs row aliased r.
const runColumns = `r.id, r.org_id, r.trace_id, r.job_type, r.status, r.priority, r.queue, r.user_id,
	r.execution_type, r.payload, r.skill_version, r.chain_id::text, r.chain_step, r.cost_ceiling_usd::float8,
	r.attempts, r.queued_at, r.cancel_requested_at IS NOT NULL, r.deadline_at, r.waiting_since, r.started_at`

func scanRun(row pgx.Row, extra ...any) (Run, error) {
	var r Run
	var chainID, chainStep *string
	err := row.Scan(append([]any{&r.ID, &r.OrgID, &r.TraceID, &r.JobType, &r.Status, &r.Priority,
		&r.Queue, &r.UserID, &r.ExecutionType, &r.Payload, &r.SkillVersion, &chainID, &chainStep,
		&r.CostCeilingUSD, &r.Attempts, &r.QueuedAt, &r.CancelRequested, &r.DeadlineAt, &r.WaitingSince, &r.StartedAt}, extra...)...)
	if chainID != nil {
		r.ChainID = *chainID
	}
	if chainStep != nil {
		r.ChainStep = *chainStep
	}
	return r, err
}

// claimRun is the common pickup in one round trip: it claims a queued run (or resumes a
// running one whose worker died) with run.Claim's statement, started being when the
// handler started, and returns the row as it was before the claim (as loadRun would have
// read it) with the status it had. ok is false, with no error and nothing written, when
// the run is missing, not runnable or has a cancellation pending: the caller then loads
// it and decides.
func claimRun(ctx context.Context, db run.DB, id string, started time.Time) (r Run, prev run.Status, ok bool, err error) {
	var parkedAt *time.Time
	var parkReason *string
	r, err = scanRun(db.QueryRow(ctx, run.ClaimStatement(runColumns+", o.old, o.parked, r.park_reason"), id, started),
		&prev, &parkedAt, &parkReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, "", false, nil
	}
	if err != nil {
		return Run{}, "", false, fmt.Errorf("claiming run %s: %w", id, err)
	}
	r.Status, r.Attempts, r.ParkedAt = prev, r.Attempts-1, parkedAt
	if parkReason != nil {
		r.ParkReason = *parkReason
	}
	return r, prev, true, nil
}
