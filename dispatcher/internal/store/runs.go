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
	ID           string
	OrgID        string
	TraceID      string
	JobType      string
	SkillID      string
	SkillVersion int
	// SkillSnapshotDigest names the binding the run was dispatched with, stored beforehand
	// with EnsureSnapshot: the run references it rather than carrying a copy.
	SkillSnapshotDigest Digest
	ExecutionType       string
	Queue               string
	Priority            string
	Status              string
	UserID              string
	Payload             json.RawMessage
	Metadata            json.RawMessage
	CallbackURL         string
	IdempotencyKey      string
	HoldReasons         json.RawMessage
	AuditFlagged        bool
	CostCeilingUSD      *float64
	Deadline            *time.Time
	BatchID             string
}

// insertRunsSQL inserts a batch of new runs, column by column. Ids travel as text: pgx has
// no binary encoding of a []string as uuid[]. A run whose idempotency key its organisation
// already used is skipped (the statement's row count tells). The skill snapshot travels as its
// 32-byte digest, not as jsonb for Postgres to parse.
const insertRunsSQL = `INSERT INTO runs (id, org_id, trace_id, job_type, skill_id, skill_version,
		skill_snapshot_digest, execution_type, queue, priority, status, user_id, payload, metadata, callback_url,
		idempotency_key, hold_reasons, audit_flagged, cost_ceiling_usd, deadline_at, batch_id, queued_at,
		event_seq)
	SELECT id::uuid, org_id::uuid, trace_id::uuid, job_type, skill_id::uuid, skill_version, skill_snapshot_digest,
		execution_type, queue, priority, status, user_id, payload, metadata, callback_url, idempotency_key,
		hold_reasons, audit_flagged, cost_ceiling_usd, deadline_at, batch_id::uuid,
		CASE WHEN status = 'queued' THEN now() END, 1
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bytea[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::jsonb[], $14::jsonb[], $15::text[], $16::text[],
		$17::jsonb[], $18::bool[], $19::numeric[], $20::timestamptz[], $21::text[])
		AS r(id, org_id, trace_id, job_type, skill_id, skill_version, skill_snapshot_digest, execution_type, queue,
			priority, status, user_id, payload, metadata, callback_url, idempotency_key, hold_reasons,
			audit_flagged, cost_ceiling_usd, deadline_at, batch_id)
	ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`

// RunBatch collects new runs for one insert statement: the dispatcher writes every run
// accepted at the same moment with one statement, not one each. Each run starts with
// event_seq 1: journal its first event with event.Firsts in the same transaction.
type RunBatch struct {
	runs    []NewRun
	written int // runs written + 1; 0 until the statement ran
}

// Add appends a run to the batch.
func (rb *RunBatch) Add(r NewRun) { rb.runs = append(rb.runs, r) }

// Append adds every run of other to the batch.
func (rb *RunBatch) Append(other *RunBatch) { rb.runs = append(rb.runs, other.runs...) }

// Len is the number of runs in the batch.
func (rb *RunBatch) Len() int { return len(rb.runs) }

// Queue adds the insert of every run of the batch to a pgx batch. Once the pgx batch has
// run, Inserted tells how many were written; fewer than Len means an idempotency key was
// taken, nothing of that run was written, and the statements after it fail (roll back).
func (rb *RunBatch) Queue(b *pgx.Batch) {
	rb.written = 0
	n := len(rb.runs)
	if n == 0 {
		return
	}
	id, orgID, traceID, jobType, executionType := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	queue, priority, status, userID, callbackURL := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payload, metadata, holdReasons := make([]string, n), make([]string, n), make([]string, n)
	snapshot := make([][]byte, n)
	skillID, idempotencyKey, batchID := make([]*string, n), make([]*string, n), make([]*string, n)
	skillVersion, auditFlagged := make([]int32, n), make([]bool, n)
	costCeiling, deadline := make([]*float64, n), make([]*time.Time, n)
	for i, r := range rb.runs {
		if r.HoldReasons == nil {
			r.HoldReasons = json.RawMessage("[]")
		}
		if r.Metadata == nil {
			r.Metadata = json.RawMessage("{}")
		}
		id[i], orgID[i], traceID[i], jobType[i], executionType[i] = r.ID, r.OrgID, r.TraceID, r.JobType, r.ExecutionType
		queue[i], priority[i], status[i], userID[i], callbackURL[i] = r.Queue, r.Priority, r.Status, r.UserID, r.CallbackURL
		snapshot[i], payload[i] = rb.runs[i].SkillSnapshotDigest[:], string(r.Payload)
		metadata[i], holdReasons[i] = string(r.Metadata), string(r.HoldReasons)
		skillID[i], idempotencyKey[i], batchID[i] = optional(r.SkillID), optional(r.IdempotencyKey), optional(r.BatchID)
		skillVersion[i], auditFlagged[i] = int32(r.SkillVersion), r.AuditFlagged
		costCeiling[i], deadline[i] = r.CostCeilingUSD, r.Deadline
	}
	b.Queue(insertRunsSQL, id, orgID, traceID, jobType, skillID, skillVersion, snapshot, executionType, queue,
		priority, status, userID, payload, metadata, callbackURL, idempotencyKey, holdReasons, auditFlagged,
		costCeiling, deadline, batchID,
	).Exec(func(tag pgconn.CommandTag) error {
		rb.written = int(tag.RowsAffected()) + 1
		return nil
	})
}

// Inserted is how many runs the statement Queue added wrote, -1 until it has run.
func (rb *RunBatch) Inserted() int { return rb.written - 1 }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ErrDuplicate is returned when an idempotency key is taken.
var ErrDuplicate = errors.New("idempotency key already used")

// LiveRuns counts the organisation's runs queued or running, stopping at limit: a
// backlog check needs to know whether the cap is reached, not by how much.
func LiveRuns(ctx context.Context, db DB, orgID string, limit int) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM runs
		WHERE org_id = $1 AND status IN ('queued', 'running') LIMIT $2) l`, orgID, limit).Scan(&n)
	return n, err
}

// DeleteRuns removes runs that never reached their queue, with their spans and events.
func DeleteRuns(ctx context.Context, db DB, orgID string, ids []string) error {
	_, err := db.Exec(ctx, `DELETE FROM runs WHERE id = ANY($1::uuid[]) AND org_id = $2`, ids, orgID)
	return err
}

// KeyedRun is the run an idempotency key created, as far as a repeated dispatch answers it.
type KeyedRun struct {
	ID, TraceID, Status, Queue string
	HoldReasons                json.RawMessage
	AuditFlagged               bool
}

// RunsByIdempotencyKeys returns the runs an organisation created with any of keys, by key,
// in one query however many keys there are.
func RunsByIdempotencyKeys(ctx context.Context, db DB, orgID string, keys []string) (map[string]KeyedRun, error) {
	rows, err := db.Query(ctx, `SELECT idempotency_key, id::text, trace_id::text, status, queue, hold_reasons, audit_flagged
		FROM runs WHERE org_id = $1 AND idempotency_key = ANY($2::text[])`, orgID, keys)
	if err != nil {
		return nil, fmt.Errorf("reading runs by idempotency key: %w", err)
	}
	out := make(map[string]KeyedRun)
	var key string
	var r KeyedRun
	_, err = pgx.ForEachRow(rows, []any{&key, &r.ID, &r.TraceID, &r.Status, &r.Queue, &r.HoldReasons, &r.AuditFlagged},
		func() error {
			out[key] = r
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("reading runs by idempotency key: %w", err)
	}
	return out, nil
}

// QueueNewBatch adds the insert of a batch's row to a pgx batch; its runs name it by id.
func QueueNewBatch(b *pgx.Batch, id, orgID string, size int) {
	b.Queue(insertBatchSQL, id, orgID, size)
}

// InsertBatch writes a batch's row on its own.
func InsertBatch(ctx context.Context, db DB, id, orgID string, size int) error {
	_, err := db.Exec(ctx, insertBatchSQL, id, orgID, size)
	return err
}

const insertBatchSQL = `INSERT INTO batches (id, org_id, size) VALUES ($1, $2, $3)`

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

// snapshotOf is a run's skill snapshot in SQL, for a query of runs r that joins
// snapshotJoin: the stored snapshot the run references, or the copy a run recorded before
// migration 00013 carries inline.
const (
	snapshotOf   = `COALESCE(s.snapshot, r.skill_snapshot)`
	snapshotJoin = `LEFT JOIN skill_snapshots s ON s.digest = r.skill_snapshot_digest`
)

// GetEnqueueInfo reads a run's queue settings from its skill snapshot and its queue.
func GetEnqueueInfo(ctx context.Context, db DB, id string) (EnqueueInfo, error) {
	var e EnqueueInfo
	err := db.QueryRow(ctx, `SELECT r.id, r.org_id, r.queue, r.priority,
			COALESCE((`+snapshotOf+`->>'timeout_seconds')::int, q.timeout_seconds),
			COALESCE((`+snapshotOf+`->>'max_retries')::int, 3)
		FROM runs r JOIN queues q ON q.name = r.queue `+snapshotJoin+` WHERE r.id = $1`, id).
		Scan(&e.ID, &e.OrgID, &e.Queue, &e.Priority, &e.TimeoutSeconds, &e.MaxRetries)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// SkillSnapshot decodes the skill binding a run was dispatched with.
func SkillSnapshot(ctx context.Context, db DB, runID string, dst any) error {
	var raw []byte
	if err := db.QueryRow(ctx, `SELECT `+snapshotOf+` FROM runs r `+snapshotJoin+` WHERE r.id = $1`, runID).
		Scan(&raw); err != nil {
		return fmt.Errorf("reading skill snapshot of run %s: %w", runID, err)
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
