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
}

var errRunMissing = errors.New("run missing")

func loadRun(ctx context.Context, db run.DB, id string) (Run, error) {
	var r Run
	var chainID, chainStep *string
	err := db.QueryRow(ctx, `SELECT id, org_id, trace_id, job_type, status, priority, queue, user_id,
			execution_type, payload, skill_version, chain_id::text, chain_step, cost_ceiling_usd::float8,
			attempts, queued_at, cancel_requested_at IS NOT NULL, deadline_at
		FROM runs WHERE id = $1`, id).Scan(&r.ID, &r.OrgID, &r.TraceID, &r.JobType, &r.Status, &r.Priority,
		&r.Queue, &r.UserID, &r.ExecutionType, &r.Payload, &r.SkillVersion, &chainID, &chainStep,
		&r.CostCeilingUSD, &r.Attempts, &r.QueuedAt, &r.CancelRequested, &r.DeadlineAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, errRunMissing
	}
	if err != nil {
		return r, fmt.Errorf("loading run %s: %w", id, err)
	}
	if chainID != nil {
		r.ChainID = *chainID
	}
	if chainStep != nil {
		r.ChainStep = *chainStep
	}
	return r, nil
}
