// Package event records a run's events in its journal and publishes them to the
// organisation's Redis channel. Every event has the run's next sequence number, so a
// client that reconnects can be replayed exactly what it missed.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// Event types of the UNO taxonomy that Switchyard emits.
const (
	JobQueued        = "job:queued"
	JobHeld          = "job:held"
	JobApproved      = "job:approved"
	JobRejected      = "job:rejected"
	JobStarted       = "job:started"
	JobSkillResolved = "job:skill_resolved"
	JobLLMCall       = "job:llm_call"
	JobLLMResponse   = "job:llm_response"
	JobToolCall      = "job:tool_call"
	JobToolResult    = "job:tool_result"
	JobSpan          = "job:span"
	JobProgress      = "job:progress"
	JobCompleted     = "job:completed"
	JobFailed        = "job:failed"
	JobCancelled     = "job:cancelled"
	JobRetrying      = "job:retrying"
	JobGPUMetrics    = "job:gpu_metrics"
	// JobWaiting: the run went back to queued to wait (data.reason "provider_capacity"),
	// holding no worker, until data.retry_at.
	JobWaiting = "job:waiting"
)

// Envelope is the wire form of an event.
type Envelope struct {
	Type  string          `json:"type"`
	JobID string          `json:"job_id"`
	OrgID string          `json:"org_id"`
	Seq   int64           `json:"seq"`
	TS    time.Time       `json:"ts"`
	Data  json.RawMessage `json:"data"`
}

// Channel is the Redis Pub/Sub channel of an organisation's events.
func Channel(orgID string) string { return "events:org:" + orgID }

// DB is what Record needs of a pool or a transaction.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Record appends an event to the run's journal with the run's next sequence number.
// Inside a transaction, publish the returned envelope after the commit.
func Record(ctx context.Context, db DB, runID, orgID, typ string, data any) (Envelope, error) {
	d, err := NewDraft(typ, data)
	if err != nil {
		return Envelope{}, err
	}
	env := Envelope{Type: typ, JobID: runID, OrgID: orgID, Data: d.Data}
	types, raw := Columns([]Draft{d})
	if err := db.QueryRow(ctx, recordAllSQL, runID, types, raw).Scan(&env.Seq, &env.TS); err != nil {
		return Envelope{}, fmt.Errorf("journaling %s event of run %s: %w", typ, runID, err)
	}
	return env, nil
}

// Draft is an event encoded but not yet journaled: its data is fixed when it is drafted, so
// later changes to the value it came from do not reach the journal.
type Draft struct {
	Type string
	Data json.RawMessage
}

// NewDraft encodes an event's data.
func NewDraft(typ string, data any) (Draft, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Draft{}, fmt.Errorf("encoding %s event: %w", typ, err)
	}
	return Draft{Type: typ, Data: raw}, nil
}

// InsertSQL is the insert that journals drafted events: src names a row source with the
// columns run_id, org_id and base (the sequence number before the first event's), types and
// data the parameters holding Columns. It is written to be used as a data-modifying CTE of
// the statement that takes the numbers.
func InsertSQL(src, types, data string) string {
	return `INSERT INTO run_events (run_id, seq, org_id, type, data)
		SELECT s.run_id, s.base + x.n, s.org_id, x.type, x.data
		FROM ` + src + ` s, unnest(` + types + `::text[], ` + data + `::jsonb[]) WITH ORDINALITY AS x(type, data, n)`
}

// Columns are the drafts' types and data as the parameters InsertSQL takes; never nil, so
// that no drafts is an empty array rather than NULL.
func Columns(drafts []Draft) (types, data []string) {
	types, data = make([]string, len(drafts)), make([]string, len(drafts))
	for i, d := range drafts {
		types[i], data[i] = d.Type, string(d.Data)
	}
	return types, data
}

// Numbered returns the envelopes of drafts journaled with sequence numbers from first on.
func Numbered(runID, orgID string, drafts []Draft, first int64, ts time.Time) []Envelope {
	if len(drafts) == 0 {
		return nil
	}
	envs := make([]Envelope, len(drafts))
	for i, d := range drafts {
		envs[i] = Envelope{Type: d.Type, JobID: runID, OrgID: orgID, Seq: first + int64(i), TS: ts, Data: d.Data}
	}
	return envs
}

// recordAllSQL takes n sequence numbers of the run in one update of its row and journals
// the n events with them, in order; it answers the first number taken and the timestamp.
var recordAllSQL = `WITH s AS (
		UPDATE runs SET event_seq = event_seq + cardinality($2::text[]) WHERE id = $1
		RETURNING id AS run_id, org_id, event_seq - cardinality($2::text[]) AS base),
	i AS (` + InsertSQL("s", "$2", "$3") + `)
	SELECT base + 1, now() FROM s`

// QueueRecordAll adds to a batch one statement that journals a run's events in the order
// given, with consecutive sequence numbers: one update of the run row for all of them
// instead of one each. The returned envelopes are complete once the batch has run without
// error.
func QueueRecordAll(b *pgx.Batch, runID, orgID string, drafts []Draft) []Envelope {
	if len(drafts) == 0 {
		return nil
	}
	envs := Numbered(runID, orgID, drafts, 0, time.Time{})
	types, data := Columns(drafts)
	b.Queue(recordAllSQL, runID, types, data).QueryRow(func(row pgx.Row) error {
		var first int64
		var ts time.Time
		if err := row.Scan(&first, &ts); err != nil {
			return fmt.Errorf("journaling %d events of run %s: %w", len(drafts), runID, err)
		}
		for i := range envs {
			envs[i].Seq, envs[i].TS = first+int64(i), ts
		}
		return nil
	})
	return envs
}

// Firsts collects the first events (seq 1) of new runs inserted in the same transaction
// with event_seq 1, for one statement: no read-modify-write of the run rows, and one
// statement for every run a dispatcher accepted at the same moment.
type Firsts struct {
	envs []*Envelope
}

// Add adds a run's first event. The envelope is complete (its TS set) once the batch that
// Queue wrote into has run without error.
func (f *Firsts) Add(runID, orgID, typ string, data any) (*Envelope, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encoding %s event: %w", typ, err)
	}
	env := &Envelope{Type: typ, JobID: runID, OrgID: orgID, Seq: 1, Data: raw}
	f.envs = append(f.envs, env)
	return env, nil
}

// Append adds every event of other; their envelopes are completed by this batch's Queue.
func (f *Firsts) Append(other *Firsts) { f.envs = append(f.envs, other.envs...) }

// Len is the number of events in the batch.
func (f *Firsts) Len() int { return len(f.envs) }

const recordFirstsSQL = `INSERT INTO run_events (run_id, seq, org_id, type, data)
	SELECT run_id::uuid, 1, org_id::uuid, type, data
	FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) AS e(run_id, org_id, type, data)
	RETURNING run_id::text, ts`

// Queue adds the journaling of every event of the batch to a pgx batch.
func (f *Firsts) Queue(b *pgx.Batch) {
	if len(f.envs) == 0 {
		return
	}
	runs, orgs, types, data := make([]string, len(f.envs)), make([]string, len(f.envs)),
		make([]string, len(f.envs)), make([]string, len(f.envs))
	byRun := make(map[string]*Envelope, len(f.envs))
	for i, env := range f.envs {
		runs[i], orgs[i], types[i], data[i] = env.JobID, env.OrgID, env.Type, string(env.Data)
		byRun[env.JobID] = env
	}
	b.Queue(recordFirstsSQL, runs, orgs, types, data).Query(func(rows pgx.Rows) error {
		var run string
		var ts time.Time
		_, err := pgx.ForEachRow(rows, []any{&run, &ts}, func() error {
			if env := byRun[run]; env != nil {
				env.TS = ts
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("journaling the first events of %d runs: %w", len(f.envs), err)
		}
		return nil
	})
}

// Publisher publishes journaled events on Redis.
type Publisher struct {
	Redis redis.UniversalClient
}

// Publish sends journaled envelopes to their organisations' channels. A failed publish
// loses nothing: the journal holds the event and clients replay from it.
func (p *Publisher) Publish(ctx context.Context, envs ...Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	pipe := p.Redis.Pipeline()
	for _, env := range envs {
		b, err := json.Marshal(env)
		if err != nil {
			return err
		}
		pipe.Publish(ctx, Channel(env.OrgID), b)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publishing events: %w", err)
	}
	return nil
}

// Emit records an event in the journal and publishes it.
func (p *Publisher) Emit(ctx context.Context, db DB, runID, orgID, typ string, data any) (Envelope, error) {
	env, err := Record(ctx, db, runID, orgID, typ, data)
	if err != nil {
		return env, err
	}
	return env, p.Publish(ctx, env)
}

// Replay returns the run's journaled events with seq greater than after, in order.
func Replay(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, orgID, runID string, after int64) ([]Envelope, error) {
	rows, err := db.Query(ctx, `SELECT type, run_id, org_id, seq, ts, data FROM run_events
		WHERE run_id = $1 AND org_id = $2 AND seq > $3 ORDER BY seq`, runID, orgID, after)
	if err != nil {
		return nil, fmt.Errorf("replaying events of run %s: %w", runID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Envelope, error) {
		var e Envelope
		err := r.Scan(&e.Type, &e.JobID, &e.OrgID, &e.Seq, &e.TS, &e.Data)
		return e, err
	})
}
