package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// TransitionError is returned when a run may not make the requested move. Nothing was
// written.
//
// Illegal is set when the move is not in the table of legal transitions (shared/run:
// run.CanTransition) — a caller asked for something no run may do, and the database was
// not asked. Otherwise the run is in From, which is not one of the statuses the caller
// allowed it to leave (another process moved it first: a cancellation, a reviewer, a
// racing attempt).
type TransitionError struct {
	RunID   string
	From    run.Status
	To      run.Status
	Illegal bool
}

func (e *TransitionError) Error() string {
	if e.Illegal {
		return fmt.Sprintf("run %s: %s -> %s is not a legal transition", e.RunID, e.From, e.To)
	}
	return fmt.Sprintf("run %s: illegal transition %s -> %s", e.RunID, e.From, e.To)
}

// Change is what a transition writes beside the status. Nil fields are left as they are.
type Change struct {
	Output json.RawMessage
	// Error is the run's final error; AttemptError is appended to the list of every attempt's.
	Error        json.RawMessage
	AttemptError json.RawMessage
	Warnings     json.RawMessage
	// CountAttempt adds one to the run's attempts (set when a worker claims it).
	CountAttempt bool
	// ClearError removes a previous final error (a retried run that is queued again).
	ClearError bool
	// ParkedUntil parks a run that is queued again to wait for provider capacity: it
	// records the park (parked_at, parked_until) and, on the first park of a wait,
	// waiting_since.
	ParkedUntil *time.Time
	// ParkReason says why (with ParkedUntil).
	ParkReason string
	// ApprovalTimeout, with a move to pending_review, sets the pause's approval_deadline to
	// the database's now plus it; zero leaves the pause without a deadline. A move to
	// pending_review always sets the deadline afresh.
	ApprovalTimeout time.Duration
}

// sources checks a requested move against the table of legal transitions and returns the
// statuses the run may leave: from, or — when from is empty — every status from which `to`
// is legal.
func sources(runID string, from []run.Status, to run.Status) ([]run.Status, error) {
	if len(from) == 0 {
		from = run.Sources(to)
		if len(from) == 0 {
			return nil, &TransitionError{RunID: runID, To: to, Illegal: true}
		}
		return from, nil
	}
	for _, f := range from {
		if !run.CanTransition(f, to) {
			return nil, &TransitionError{RunID: runID, From: f, To: to, Illegal: true}
		}
	}
	return slices.Clone(from), nil
}

// Transition moves the run from one of the statuses `from` (empty: any status from which
// the move is legal) to `to`, in one statement that locks the run's row, and returns the
// status it left. A move the table of legal transitions does not hold is refused before
// the database is asked; a run in a status outside `from` is refused with the status it is
// in. Both are a *TransitionError, and nothing is written. Timestamps follow the status:
// queued_at, started_at, finished_at.
func (s *Store) Transition(ctx context.Context, runID string, from []run.Status, to run.Status, c Change) (run.Status, error) {
	sql, args, err := transitionStatement(runID, from, to, c, nil)
	if err != nil {
		return "", err
	}
	var old run.Status
	var first int64
	var ts time.Time
	var orgID string
	err = s.db.QueryRow(ctx, sql, args...).Scan(&old, &first, &ts, &orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Refused(ctx, runID, to)
	}
	if err != nil {
		return "", fmt.Errorf("moving run %s to %s: %w", runID, to, err)
	}
	return old, nil
}

// Refused explains a transition to `to` that did not happen: ErrNotFound, or a
// *TransitionError with the status the run is in (also returned).
func (s *Store) Refused(ctx context.Context, runID string, to run.Status) (run.Status, error) {
	var current run.Status
	err := s.db.QueryRow(ctx, statusSQL, runID).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading status of run %s: %w", runID, err)
	}
	return current, &TransitionError{RunID: runID, From: current, To: to}
}

// Outcome is what a queued transition did; it is known once its batch has run.
type Outcome struct {
	// Moved reports whether the run moved; when it did not, nothing was written and
	// Store.Refused says why.
	Moved bool
	// From is the status the run left.
	From run.Status
	// Events are the journaled events, numbered.
	Events []event.Envelope
}

// QueueTransition adds Transition's statement to a batch, journaling the drafted events in
// the same statement — numbered after the run's last, in the order given, the numbers taken
// in the same update of the run row — if and only if the run moves. A move the table does
// not hold is refused at once (a *TransitionError) and nothing is queued.
func QueueTransition(b *pgx.Batch, runID string, from []run.Status, to run.Status, c Change, drafts []event.Draft) (*Outcome, error) {
	sql, args, err := transitionStatement(runID, from, to, c, drafts)
	if err != nil {
		return nil, err
	}
	out := &Outcome{}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var first int64
		var ts time.Time
		var orgID string
		err := row.Scan(&out.From, &first, &ts, &orgID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("moving run %s to %s: %w", runID, to, err)
		}
		out.Moved = true
		out.Events = numbered(runID, orgID, drafts, first, ts)
		return nil
	})
	return out, nil
}

// transitionStatement builds Transition's statement: $1 the run id, $2 the new status, $3
// the statuses it may leave, $4 and $5 the events' types and data, then the change. Its
// SET list depends on the change, so it is composed here rather than kept in sql/.
//
// It names the run's id on the updated row as well as in the locking subquery: with the
// join alone, a plan made while the table was nearly empty (and kept by a connection's
// prepared statement) scans the whole table on every call once it has grown.
func transitionStatement(runID string, from []run.Status, to run.Status, c Change, drafts []event.Draft) (string, []any, error) {
	from, err := sources(runID, from, to)
	if err != nil {
		return "", nil, err
	}
	types, data := eventColumns(drafts)
	args := []any{runID, to, from, types, data}
	sets := []string{"status = $2", "updated_at = now()"}
	if len(drafts) > 0 {
		sets = append(sets, "event_seq = r.event_seq + cardinality($4::text[])")
	}
	add := func(expr string, v any) {
		args = append(args, v)
		sets = append(sets, strings.ReplaceAll(expr, "?", "$"+strconv.Itoa(len(args))))
	}
	if c.Output != nil {
		add("output = ?", c.Output)
	}
	if c.Error != nil {
		add("error = ?", c.Error)
	} else if c.ClearError {
		sets = append(sets, "error = NULL")
	}
	if c.AttemptError != nil {
		add("attempt_errors = r.attempt_errors || jsonb_build_array(?::jsonb)", c.AttemptError)
	}
	if c.Warnings != nil {
		add("warnings = ?", c.Warnings)
	}
	if c.CountAttempt {
		sets = append(sets, "attempts = r.attempts + 1")
	}
	if c.ParkedUntil != nil {
		add("parked_until = ?", *c.ParkedUntil)
		add("park_reason = ?", c.ParkReason)
		sets = append(sets, "parked_at = now()", "waiting_since = COALESCE(r.waiting_since, now())")
	}
	if to == run.PendingReview {
		if c.ApprovalTimeout > 0 {
			add("approval_deadline = now() + ?::bigint * interval '1 microsecond'", c.ApprovalTimeout.Microseconds())
		} else {
			sets = append(sets, "approval_deadline = NULL")
		}
	}
	switch {
	case to == run.Queued:
		sets = append(sets, "queued_at = COALESCE(r.queued_at, now())")
	case to == run.Running:
		sets = append(sets, "started_at = now()")
	case to.Terminal():
		sets = append(sets, "finished_at = now()")
	}
	return `WITH t AS (
			UPDATE runs r SET ` + strings.Join(sets, ", ") + `
			FROM (SELECT id, status AS old FROM runs WHERE id = $1 FOR UPDATE) o
			WHERE r.id = $1 AND r.id = o.id AND o.old = ANY($3)
			RETURNING o.old, r.id AS run_id, r.org_id, r.event_seq - cardinality($4::text[]) AS base),
		e AS (` + insertEventsFrom("t", "$4", "$5") + `)
		SELECT old, base + 1, now(), org_id FROM t`, args, nil
}

// Claim marks the run running for a worker's attempt and counts the attempt. Unlike
// Transition it also accepts a run that is running already (its status does not change,
// so the table of transitions does not list it): that is a task handed out again after its
// worker died, and the new attempt resumes it from the journal. It returns the status the
// run had; a run in any other status, or whose cancellation was requested, is a
// *TransitionError.
func (s *Store) Claim(ctx context.Context, runID string) (run.Status, error) {
	_, prev, ok, err := s.ClaimWork(ctx, runID, time.Now())
	if err != nil {
		return "", err
	}
	if !ok {
		return s.Refused(ctx, runID, run.Running)
	}
	return prev, nil
}
