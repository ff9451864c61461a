// Package store holds the dispatcher's SQL: runs as the public API shows them, queues and
// organisations. Handlers and the pipeline call these functions; no SQL lives elsewhere in
// the dispatcher except the shared contract packages (run, span, event, skill).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs of a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is returned when a row does not exist in the caller's organisation.
var ErrNotFound = errors.New("not found")

// NewRun is the row written when a job is accepted.
type NewRun struct {
	ID             string
	OrgID          string
	TraceID        string
	JobType        string
	SkillID        string
	SkillVersion   int
	SkillSnapshot  json.RawMessage
	ExecutionType  string
	Queue          string
	Priority       string
	Status         string
	UserID         string
	Payload        json.RawMessage
	Metadata       json.RawMessage
	CallbackURL    string
	IdempotencyKey string
	HoldReasons    json.RawMessage
	AuditFlagged   bool
	CostCeilingUSD *float64
	Deadline       *time.Time
	BatchID        string
}

const insertRunSQL = `INSERT INTO runs (id, org_id, trace_id, job_type, skill_id, skill_version,
		skill_snapshot, execution_type, queue, priority, status, user_id, payload, metadata, callback_url,
		idempotency_key, hold_reasons, audit_flagged, cost_ceiling_usd, deadline_at, batch_id, queued_at,
		event_seq)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
		CASE WHEN $11 = 'queued' THEN now() END, 1)
	ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id`

func insertRunArgs(r NewRun) []any {
	var idem, batch any
	if r.IdempotencyKey != "" {
		idem = r.IdempotencyKey
	}
	if r.BatchID != "" {
		batch = r.BatchID
	}
	if r.HoldReasons == nil {
		r.HoldReasons = json.RawMessage("[]")
	}
	if r.Metadata == nil {
		r.Metadata = json.RawMessage("{}")
	}
	return []any{r.ID, r.OrgID, r.TraceID, r.JobType, r.SkillID, r.SkillVersion, r.SkillSnapshot, r.ExecutionType,
		r.Queue, r.Priority, r.Status, r.UserID, r.Payload, r.Metadata, r.CallbackURL, idem,
		r.HoldReasons, r.AuditFlagged, r.CostCeilingUSD, r.Deadline, batch}
}

// QueueInsertRun adds the insert of a new run to a batch. The run starts with event_seq 1:
// queue its first event with event.QueueRecordFirst in the same batch. *inserted is set when
// the batch runs: false means the organisation already has a run with the same idempotency key and
// nothing was written (statements queued after it then fail, and the transaction must be
// rolled back).
func QueueInsertRun(b *pgx.Batch, r NewRun, inserted *bool) {
	b.Queue(insertRunSQL, insertRunArgs(r)...).QueryRow(func(row pgx.Row) error {
		var id string
		err := row.Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			*inserted = false
			return ErrDuplicate
		}
		*inserted = err == nil
		return err
	})
}

// ErrDuplicate is returned when an idempotency key is taken.
var ErrDuplicate = errors.New("idempotency key already used")

// DeleteRun removes a run that never reached its queue.
func DeleteRun(ctx context.Context, db DB, orgID, id string) error {
	_, err := db.Exec(ctx, `DELETE FROM runs WHERE id = $1 AND org_id = $2`, id, orgID)
	return err
}

// RunIDByIdempotencyKey returns the run an organisation created with key.
func RunIDByIdempotencyKey(ctx context.Context, db DB, orgID, key string) (string, error) {
	var id string
	err := db.QueryRow(ctx, `SELECT id FROM runs WHERE org_id = $1 AND idempotency_key = $2`, orgID, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return id, err
}

// Run is a run as GET /api/v1/dispatch/{id} shows it.
type Run struct {
	JobID         string          `json:"jobId"`
	TraceID       string          `json:"traceId"`
	JobType       string          `json:"jobType"`
	SkillVersion  int             `json:"skillVersion"`
	ExecutionType string          `json:"executionType"`
	Status        string          `json:"status"`
	Queue         string          `json:"queue"`
	Priority      string          `json:"priority"`
	UserID        string          `json:"userId"`
	Metadata      json.RawMessage `json:"metadata"`
	Output        json.RawMessage `json:"output"`
	Error         json.RawMessage `json:"error"`
	AttemptErrors json.RawMessage `json:"attemptErrors"`
	Warnings      json.RawMessage `json:"warnings"`
	HoldReasons   json.RawMessage `json:"holdReasons"`
	AuditFlagged  bool            `json:"auditFlagged"`
	Attempts      int             `json:"attempts"`
	ChainID       *string         `json:"chainId,omitempty"`
	ChainStep     *string         `json:"chainStep,omitempty"`
	BatchID       *string         `json:"batchId,omitempty"`
	Timings       Timings         `json:"timings"`
	Billing       Billing         `json:"billing"`
	// Payload is only shown to callers who may see it (see the handler).
	Payload json.RawMessage `json:"payload,omitempty"`
	// OrgID is used for scoping, never shown.
	OrgID string `json:"-"`
}

// Timings are a run's timestamps and the durations derived from them.
type Timings struct {
	CreatedAt   time.Time  `json:"createdAt"`
	QueuedAt    *time.Time `json:"queuedAt"`
	StartedAt   *time.Time `json:"startedAt"`
	FinishedAt  *time.Time `json:"finishedAt"`
	QueueWaitMS *float64   `json:"queueWaitMs"`
	DurationMS  *float64   `json:"durationMs"`
}

// Billing is what a run has cost so far.
type Billing struct {
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
	LLMCalls     int     `json:"llmCalls"`
}

const runColumns = `id, trace_id, job_type, skill_version, execution_type, status, queue, priority, user_id,
	metadata, output, error, attempt_errors, warnings, hold_reasons, audit_flagged, attempts,
	chain_id::text, chain_step, batch_id::text, created_at, queued_at, started_at, finished_at,
	tokens_in, tokens_out, tokens_cached, cost_usd::float8, llm_calls, payload, org_id`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.JobID, &r.TraceID, &r.JobType, &r.SkillVersion, &r.ExecutionType, &r.Status, &r.Queue,
		&r.Priority, &r.UserID, &r.Metadata, &r.Output, &r.Error, &r.AttemptErrors, &r.Warnings,
		&r.HoldReasons, &r.AuditFlagged, &r.Attempts, &r.ChainID, &r.ChainStep, &r.BatchID,
		&r.Timings.CreatedAt, &r.Timings.QueuedAt, &r.Timings.StartedAt, &r.Timings.FinishedAt,
		&r.Billing.TokensIn, &r.Billing.TokensOut, &r.Billing.TokensCached, &r.Billing.CostUSD,
		&r.Billing.LLMCalls, &r.Payload, &r.OrgID)
	if err != nil {
		return r, err
	}
	t := &r.Timings
	if t.QueuedAt != nil && t.StartedAt != nil {
		t.QueueWaitMS = ms(t.StartedAt.Sub(*t.QueuedAt))
	}
	if t.StartedAt != nil && t.FinishedAt != nil {
		t.DurationMS = ms(t.FinishedAt.Sub(*t.StartedAt))
	}
	return r, nil
}

func ms(d time.Duration) *float64 {
	v := float64(d.Microseconds()) / 1000
	return &v
}

// GetRun returns one of an organisation's runs. Another organisation's run is ErrNotFound,
// exactly as a missing one.
func GetRun(ctx context.Context, db DB, orgID, id string) (Run, error) {
	r, err := scanRun(db.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1 AND org_id = $2`, id, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, err)
	}
	return r, nil
}

// ListFilter selects runs.
type ListFilter struct {
	Statuses []string
	JobType  string
	Queue    string
	Since    *time.Time
	Until    *time.Time
	Limit    int
	// After is the keyset cursor: runs created before (CreatedAt, ID).
	AfterCreated *time.Time
	AfterID      string
}

// ListRuns returns an organisation's runs, newest first.
func ListRuns(ctx context.Context, db DB, orgID string, f ListFilter) ([]Run, error) {
	rows, err := db.Query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE org_id = $1
		  AND (COALESCE(cardinality($2::text[]), 0) = 0 OR status = ANY($2))
		  AND ($3 = '' OR job_type = $3)
		  AND ($4 = '' OR queue = $4)
		  AND ($5::timestamptz IS NULL OR created_at >= $5)
		  AND ($6::timestamptz IS NULL OR created_at < $6)
		  AND ($7::timestamptz IS NULL OR (created_at, id) < ($7, $8::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $9`,
		orgID, f.Statuses, f.JobType, f.Queue, f.Since, f.Until, f.AfterCreated, nullUUID(f.AfterID), f.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
}

func nullUUID(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// RequestCancel marks a running run for cancellation; the executor stops at its next step.
// It reports false when the run was not running.
func RequestCancel(ctx context.Context, db DB, orgID, id string) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE runs SET cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
		WHERE id = $1 AND org_id = $2 AND status = 'running'`, id, orgID)
	if err != nil {
		return false, fmt.Errorf("requesting cancellation: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// InsertReview records a reviewer's decision.
func InsertReview(ctx context.Context, db DB, runID, orgID, decision, reviewer, reason string) error {
	_, err := db.Exec(ctx, `INSERT INTO reviews (run_id, org_id, decision, reviewer, reason) VALUES ($1, $2, $3, $4, $5)`,
		runID, orgID, decision, reviewer, reason)
	if err != nil {
		return fmt.Errorf("recording review: %w", err)
	}
	return nil
}

// EnqueueInfo is what re-enqueueing a run needs.
type EnqueueInfo struct {
	ID, OrgID, Queue, Priority string
	TimeoutSeconds             int
	MaxRetries                 int
}

// GetEnqueueInfo reads a run's queue settings from its skill snapshot and its queue.
func GetEnqueueInfo(ctx context.Context, db DB, id string) (EnqueueInfo, error) {
	var e EnqueueInfo
	err := db.QueryRow(ctx, `SELECT r.id, r.org_id, r.queue, r.priority,
			COALESCE((r.skill_snapshot->>'timeout_seconds')::int, q.timeout_seconds),
			COALESCE((r.skill_snapshot->>'max_retries')::int, 3)
		FROM runs r JOIN queues q ON q.name = r.queue WHERE r.id = $1`, id).
		Scan(&e.ID, &e.OrgID, &e.Queue, &e.Priority, &e.TimeoutSeconds, &e.MaxRetries)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// SkillSnapshot decodes the skill binding a run was dispatched with.
func SkillSnapshot(ctx context.Context, db DB, runID string, dst any) error {
	var raw []byte
	if err := db.QueryRow(ctx, `SELECT skill_snapshot FROM runs WHERE id = $1`, runID).Scan(&raw); err != nil {
		return err
	}
	return json.Unmarshal(raw, dst)
}

// LastEventData returns the data of a run's latest event of a type.
func LastEventData(ctx context.Context, db DB, runID, typ string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := db.QueryRow(ctx, `SELECT data FROM run_events WHERE run_id = $1 AND type = $2 ORDER BY seq DESC LIMIT 1`,
		runID, typ).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return raw, err
}
