package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what this package needs of a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is returned when no run has the given id.
var ErrNotFound = errors.New("run not found")

// TransitionError is returned when a run is not in a status from which the requested
// transition is legal. Nothing was written.
type TransitionError struct {
	RunID string
	From  Status
	To    Status
}

func (e *TransitionError) Error() string {
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
}

// Transition moves the run to status `to` if — and only if — that is legal from its
// current status, in one statement, and returns the status it left. Timestamps follow
// the status: queued_at, started_at, finished_at.
func Transition(ctx context.Context, db DB, runID string, to Status, c Change) (Status, error) {
	from := Sources(to)
	if len(from) == 0 {
		return "", &TransitionError{RunID: runID, To: to}
	}
	args := []any{runID, to, from}
	sets := []string{"status = $2", "updated_at = now()"}
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
	switch {
	case to == Queued:
		sets = append(sets, "queued_at = COALESCE(r.queued_at, now())")
	case to == Running:
		sets = append(sets, "started_at = now()")
	case to.Terminal():
		sets = append(sets, "finished_at = now()")
	}
	var old Status
	err := db.QueryRow(ctx, transitionStatement(sets), args...).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		var current Status
		err := db.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, runID).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", ErrNotFound
		}
		if err != nil {
			return "", fmt.Errorf("reading status of run %s: %w", runID, err)
		}
		return current, &TransitionError{RunID: runID, From: current, To: to}
	}
	if err != nil {
		return "", fmt.Errorf("moving run %s to %s: %w", runID, to, err)
	}
	return old, nil
}

// transitionStatement is Transition's statement: $1 the run id, $3 the statuses it may
// leave, sets the assignments.
func transitionStatement(sets []string) string {
	return `UPDATE runs r SET ` + strings.Join(sets, ", ") + `
		FROM (SELECT id, status AS old FROM runs WHERE id = $1 FOR UPDATE) o
		WHERE r.id = $1 AND r.id = o.id AND o.old = ANY($3)
		RETURNING o.old`
}

// ClaimStatement is Claim's statement ($1: the run id) with the caller's RETURNING list, in
// which r is the claimed row (as updated) and o.old the status it had. It returns no row
// when the run is missing, in any status but queued or running, or has a cancellation
// pending. A worker uses it to claim a run and read it in one round trip.
//
// Both statements name the run's id on the updated row as well as in the locking subquery:
// with the join alone, a plan made while the table was nearly empty (and kept by a
// connection's prepared statement) scans the whole table on every claim once it has grown.
func ClaimStatement(returning string) string {
	return `UPDATE runs r SET status = 'running', attempts = r.attempts + 1,
			started_at = COALESCE(r.started_at, now()), updated_at = now()
		FROM (SELECT id, status AS old FROM runs WHERE id = $1 FOR UPDATE) o
		WHERE r.id = $1 AND r.id = o.id AND o.old IN ('queued', 'running') AND r.cancel_requested_at IS NULL
		RETURNING ` + returning
}

// Claim marks the run running for a worker's attempt and counts the attempt. Unlike
// Transition it also accepts a run that is running already: that is a task handed out
// again after its worker died, and the new attempt resumes it from the journal. It
// returns the status the run had; a run in any other status, or whose cancellation was
// requested, is a TransitionError.
func Claim(ctx context.Context, db DB, runID string) (Status, error) {
	var old Status
	err := db.QueryRow(ctx, ClaimStatement("o.old"), runID).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		var current Status
		err := db.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, runID).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", ErrNotFound
		}
		if err != nil {
			return "", fmt.Errorf("reading status of run %s: %w", runID, err)
		}
		return current, &TransitionError{RunID: runID, From: current, To: Running}
	}
	if err != nil {
		return "", fmt.Errorf("claiming run %s: %w", runID, err)
	}
	return old, nil
}
