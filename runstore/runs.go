package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// NewRun is the row written when a job is accepted.
type NewRun struct {
	ID           string
	OrgID        string
	TraceID      string
	JobType      string
	SkillID      string
	SkillVersion int
	// SkillSnapshotDigest names the binding the run was dispatched with, stored beforehand
	// (the dispatcher's store.EnsureSnapshot): the run references it rather than carrying a copy.
	SkillSnapshotDigest [32]byte
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
	// ChainID and ChainStep make the run a chain's: its parent run (no step) or one of its
	// steps ("step", or "step[i]" for a for_each instance).
	ChainID, ChainStep string
}

// RunBatch collects new runs for one insert statement: the dispatcher writes every run
// accepted at the same moment with one statement, not one each. Each run starts with
// event_seq 1: journal its first event with Firsts in the same transaction.
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
	chainID, chainStep := make([]*string, n), make([]*string, n)
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
		chainID[i], chainStep[i] = optional(r.ChainID), optional(r.ChainStep)
	}
	b.Queue(insertRunsSQL, id, orgID, traceID, jobType, skillID, skillVersion, snapshot, executionType, queue,
		priority, status, userID, payload, metadata, callbackURL, idempotencyKey, holdReasons, auditFlagged,
		costCeiling, deadline, batchID, chainID, chainStep,
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
func (s *Store) LiveRuns(ctx context.Context, orgID string, limit int) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, liveRunsSQL, orgID, limit).Scan(&n)
	return n, err
}

// DeleteRuns removes runs that never reached their queue, with their spans and events.
func (s *Store) DeleteRuns(ctx context.Context, orgID string, ids []string) error {
	_, err := s.db.Exec(ctx, deleteRunsSQL, ids, orgID)
	return err
}

// KeyedRun is the run an idempotency key created, as far as a repeated dispatch answers it.
type KeyedRun struct {
	ID, TraceID, Status, Queue string
	HoldReasons                json.RawMessage
	AuditFlagged               bool
	// ChainID is set when the run is a chain's parent run.
	ChainID string
}

// RunsByIdempotencyKeys returns the runs an organisation created with any of keys, by key,
// in one query however many keys there are.
func (s *Store) RunsByIdempotencyKeys(ctx context.Context, orgID string, keys []string) (map[string]KeyedRun, error) {
	rows, err := s.db.Query(ctx, runsByIdempotencyKeysSQL, orgID, keys)
	if err != nil {
		return nil, fmt.Errorf("reading runs by idempotency key: %w", err)
	}
	out := make(map[string]KeyedRun)
	var key string
	var r KeyedRun
	_, err = pgx.ForEachRow(rows, []any{&key, &r.ID, &r.TraceID, &r.Status, &r.Queue, &r.HoldReasons, &r.AuditFlagged, &r.ChainID},
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
func (s *Store) InsertBatch(ctx context.Context, id, orgID string, size int) error {
	_, err := s.db.Exec(ctx, insertBatchSQL, id, orgID, size)
	return err
}

// Run is a run as GET /api/v1/dispatch/{id} shows it (apitypes.Run, the wire type the Go
// client shares), with what the dispatcher knows of it beside.
type Run struct {
	apitypes.Run
	// Payload is only shown to callers who may see it (see the handler).
	Payload json.RawMessage `json:"payload,omitempty"`
	// OrgID is used for scoping, never shown.
	OrgID string `json:"-"`
}

// Timings are a run's timestamps and the durations derived from them.
type Timings = apitypes.Timings

// Billing is what a run has cost so far.
type Billing = apitypes.Billing

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.JobID, &r.TraceID, &r.JobType, &r.SkillVersion, &r.ExecutionType, &r.Status, &r.Queue,
		&r.Priority, &r.UserID, &r.Metadata, &r.Output, &r.Error, &r.AttemptErrors, &r.Warnings,
		&r.HoldReasons, &r.AuditFlagged, &r.Attempts, &r.ChainID, &r.ChainStep, &r.BatchID,
		&r.Timings.CreatedAt, &r.Timings.QueuedAt, &r.Timings.StartedAt, &r.Timings.FinishedAt,
		&r.Billing.TokensIn, &r.Billing.TokensOut, &r.Billing.TokensCached, &r.Billing.CostUSD,
		&r.Billing.LLMCalls, &r.ApprovalDeadline, &r.Payload, &r.OrgID)
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
func (s *Store) GetRun(ctx context.Context, orgID, id string) (Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, getRunSQL, id, orgID))
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
func (s *Store) ListRuns(ctx context.Context, orgID string, f ListFilter) ([]Run, error) {
	rows, err := s.db.Query(ctx, listRunsSQL,
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

// EnqueueInfo is what re-enqueueing a run needs.
type EnqueueInfo struct {
	ID, OrgID, Queue, Priority string
	ExecutionType, ChainID     string
	TimeoutSeconds             int
	MaxRetries                 int
}

// GetEnqueueInfo reads a run's queue settings from its skill snapshot and its queue.
func (s *Store) GetEnqueueInfo(ctx context.Context, id string) (EnqueueInfo, error) {
	var e EnqueueInfo
	err := s.db.QueryRow(ctx, enqueueInfoSQL, id).
		Scan(&e.ID, &e.OrgID, &e.Queue, &e.Priority, &e.ExecutionType, &e.ChainID, &e.TimeoutSeconds, &e.MaxRetries)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// SkillSnapshot decodes the skill binding a run was dispatched with.
func (s *Store) SkillSnapshot(ctx context.Context, runID string, dst any) error {
	var raw []byte
	if err := s.db.QueryRow(ctx, skillSnapshotSQL, runID).
		Scan(&raw); err != nil {
		return fmt.Errorf("reading skill snapshot of run %s: %w", runID, err)
	}
	return json.Unmarshal(raw, dst)
}
