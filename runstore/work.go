package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// Work is a run as a worker reads it.
type Work struct {
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
	// since its last answer); ParkedAt and ParkReason, set by ClaimWork only, say when and
	// why the run was parked if this pickup ends a park.
	WaitingSince, ParkedAt *time.Time
	ParkReason             string
	// StartedAt is the run's first pickup; nil before it.
	StartedAt *time.Time
}

// LoadWork reads a run as a worker needs it; ErrNotFound when there is none.
func (s *Store) LoadWork(ctx context.Context, id string) (Work, error) {
	w, err := scanWork(s.db.QueryRow(ctx, loadWorkSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("loading run %s: %w", id, err)
	}
	return w, nil
}

func scanWork(row pgx.Row, extra ...any) (Work, error) {
	var w Work
	var chainID, chainStep *string
	err := row.Scan(append([]any{&w.ID, &w.OrgID, &w.TraceID, &w.JobType, &w.Status, &w.Priority,
		&w.Queue, &w.UserID, &w.ExecutionType, &w.Payload, &w.SkillVersion, &chainID, &chainStep,
		&w.CostCeilingUSD, &w.Attempts, &w.QueuedAt, &w.CancelRequested, &w.DeadlineAt, &w.WaitingSince, &w.StartedAt}, extra...)...)
	if chainID != nil {
		w.ChainID = *chainID
	}
	if chainStep != nil {
		w.ChainStep = *chainStep
	}
	return w, err
}

// ClaimWork is the common pickup in one round trip: it claims a queued run (or resumes a
// running one whose worker died; see Claim) for an attempt whose handler started at
// `started`, and returns the row as it was before the claim (as LoadWork would have read
// it) with the status it had. ok is false, with no error and nothing written, when the run
// is missing, not runnable or has a cancellation pending: the caller then loads it and
// decides.
func (s *Store) ClaimWork(ctx context.Context, id string, started time.Time) (w Work, prev run.Status, ok bool, err error) {
	var parkedAt *time.Time
	var parkReason *string
	w, err = scanWork(s.db.QueryRow(ctx, claimWorkSQL, id, started), &prev, &parkedAt, &parkReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return Work{}, "", false, nil
	}
	if err != nil {
		return Work{}, "", false, fmt.Errorf("claiming run %s: %w", id, err)
	}
	w.Status, w.Attempts, w.ParkedAt = prev, w.Attempts-1, parkedAt
	if parkReason != nil {
		w.ParkReason = *parkReason
	}
	return w, prev, true, nil
}

// CancelRequested reports whether the run's cancellation was requested.
func (s *Store) CancelRequested(ctx context.Context, runID string) (bool, error) {
	var requested bool
	if err := s.db.QueryRow(ctx, cancelRequestedSQL, runID).Scan(&requested); err != nil {
		return false, fmt.Errorf("reading cancellation of run %s: %w", runID, err)
	}
	return requested, nil
}

// RequestCancel marks a running run of the organisation for cancellation; the executor
// stops at its next step. It reports false when the run was not running.
func (s *Store) RequestCancel(ctx context.Context, orgID, id string) (bool, error) {
	tag, err := s.db.Exec(ctx, requestCancelSQL, id, orgID)
	if err != nil {
		return false, fmt.Errorf("requesting cancellation: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AddHoldReasons appends reasons (encoded as a JSON array) to the run's hold_reasons,
// which reviewers read.
func (s *Store) AddHoldReasons(ctx context.Context, runID string, reasons any) error {
	raw, err := json.Marshal(reasons)
	if err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, addHoldReasonsSQL, runID, raw); err != nil {
		return fmt.Errorf("recording hold reasons of run %s: %w", runID, err)
	}
	return nil
}

// Result is how a run ended, as a chain step reports it.
type Result struct {
	Status        run.Status
	Output, Error []byte
}

// Result reads a run's status, output and error.
func (s *Store) Result(ctx context.Context, runID string) (Result, error) {
	var r Result
	if err := s.db.QueryRow(ctx, resultSQL, runID).Scan(&r.Status, &r.Output, &r.Error); err != nil {
		return r, fmt.Errorf("reading result of run %s: %w", runID, err)
	}
	return r, nil
}
