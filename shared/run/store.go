package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard-ai/switchyard/shared/event"
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
	// ParkedUntil parks a run that is queued again to wait for provider capacity: it
	// records the park (parked_at, parked_until) and, on the first park of a wait,
	// waiting_since.
	ParkedUntil *time.Time
	// ParkReason says why (with ParkedUntil).
	ParkReason string
}

// Transition moves the run to status `to` if — and only if — that is legal from its
// current status, in one statement, and returns the status it left. Timestamps follow
// the status: queued_at, started_at, finished_at.
func Transition(ctx context.Context, db DB, runID string, to Status, c Change) (Status, error) {
	sql, args, err := transitionStatement(runID, to, c, nil)
	if err != nil {
		return "", err
	}
	var old Status
	var first int64
	var ts time.Time
	var orgID string
	err = db.QueryRow(ctx, sql, args...).Scan(&old, &first, &ts, &orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Refused(ctx, db, runID, to)
	}
	if err != nil {
		return "", fmt.Errorf("moving run %s to %s: %w", runID, to, err)
	}
	return old, nil
}

// Refused explains a transition to `to` that did not happen: ErrNotFound, or a
// *TransitionError with the status the run is in (also returned).
func Refused(ctx context.Context, db DB, runID string, to Status) (Status, error) {
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

// Outcome is what a queued transition did; it is known once its batch has run.
type Outcome struct {
	// Moved reports whether the run moved; when it did not, nothing was written and Refused
	// says why.
	Moved bool
	// From is the status the run left.
	From Status
	// Events are the journaled events, numbered.
	Events []event.Envelope
}

// QueueTransition adds Transition's statement to a batch, journaling the drafted events in
// the same statement — numbered after the run's last, in the order given, the numbers taken
// in the same update of the run row — if and only if the run moves.
func QueueTransition(b *pgx.Batch, runID string, to Status, c Change, drafts []event.Draft) (*Outcome, error) {
	sql, args, err := transitionStatement(runID, to, c, drafts)
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
		out.Events = event.Numbered(runID, orgID, drafts, first, ts)
		return nil
	})
	return out, nil
}

// transitionStatement builds Transition's statement: $1 the run id, $2 the new status, $3
// the statuses it may leave, $4 and $5 the events' types and data, then the change.
//
// It names the run's id on the updated row as well as in the locking subquery: with the
// join alone, a plan made while the table was nearly empty (and kept by a connection's
// prepared statement) scans the whole table on every call once it has grown.
func transitionStatement(runID string, to Status, c Change, drafts []event.Draft) (string, []any, error) {
	from := Sources(to)
	if len(from) == 0 {
		return "", nil, &TransitionError{RunID: runID, To: to}
	}
	types, data := event.Columns(drafts)
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
	switch {
	case to == Queued:
		sets = append(sets, "queued_at = COALESCE(r.queued_at, now())")
	case to == Running:
		sets = append(sets, "started_at = now()")
	case to.Terminal():
		sets = append(sets, "finished_at = now()")
	}
	return `WITH t AS (
			UPDATE runs r SET ` + strings.Join(sets, ", ") + `
			FROM (SELECT id, status AS old FROM runs WHERE id = $1 FOR UPDATE) o
			WHERE r.id = $1 AND r.id = o.id AND o.old = ANY($3)
			RETURNING o.old, r.id AS run_id, r.org_id, r.event_seq - cardinality($4::text[]) AS base),
		e AS (` + event.InsertSQL("t", "$4", "$5") + `)
		SELECT old, base + 1, now(), org_id FROM t`, args, nil
}

// ClaimStatement is Claim's statement ($1: the run id; $2: when the worker's handler
// started, which becomes the run's started_at on its first claim) with the caller's
// RETURNING list, in which r is the claimed row (as updated), o.old the status it had and
// o.parked when it was last parked (null unless it comes back from a park).
// It returns no row when the run is missing, in any status but queued or running, or has
// a cancellation pending. A worker uses it to claim a run and read it in one round trip.
// Like Transition's, it names the run's id on the updated row too.
//
// started_at is the handler's start, not the claim's: the run started when a worker took
// it off the queue, and the claim's own round trip is part of executing it. Queue transit
// (queued_at → started_at) is then the queue's, whatever the database's load.
func ClaimStatement(returning string) string {
	return `UPDATE runs r SET status = 'running', attempts = r.attempts + 1,
			started_at = COALESCE(r.started_at, $2::timestamptz), parked_at = NULL, updated_at = now()
		FROM (SELECT id, status AS old, parked_at AS parked FROM runs WHERE id = $1 FOR UPDATE) o
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
	err := db.QueryRow(ctx, ClaimStatement("o.old"), runID, time.Now()).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		return Refused(ctx, db, runID, Running)
	}
	if err != nil {
		return "", fmt.Errorf("claiming run %s: %w", runID, err)
	}
	return old, nil
}
