// Package span records a run's execution spans: one tree per run (for chains, one tree per
// chain with each step's run a subtree). A span is written when it starts and again when
// it ends; every write is also an event (job:span) carrying the whole span.
package span

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/switchyard-ai/switchyard/shared/ids"
)

// Type is one of the closed list of span types of ARCHITECTURE.md.
type Type string

// The span types.
const (
	Dispatch         Type = "dispatch"
	GovernanceCheck  Type = "governance_check"
	GovernanceReview Type = "governance_review"
	QueueWait        Type = "queue_wait"
	SkillResolve     Type = "skill_resolve"
	ReactIteration   Type = "react_iteration"
	LLMCall          Type = "llm_call"
	ToolCall         Type = "tool_call"
	ChainStep        Type = "chain_step"
	ChainFork        Type = "chain_fork"
	ChainJoin        Type = "chain_join"
	GoalDecompose    Type = "goal_decompose"
	Reflection       Type = "reflection"
	PlanAdjust       Type = "plan_adjust"
	GoalEvaluate     Type = "goal_evaluate"
	BatchFanout      Type = "batch_fanout"
	BatchAggregate   Type = "batch_aggregate"
)

// Status of a span.
type Status string

// Span statuses.
const (
	Running Status = "running"
	OK      Status = "ok"
	Error   Status = "error"
	Skipped Status = "skipped"
	// Abandoned closes a span that an attempt left running when it died (SIGKILL, lost
	// lease): the attempt that resumes the run closes it, see Abandon.
	Abandoned Status = "abandoned"
)

// Billing is what an llm_call span costs.
type Billing struct {
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
}

// Span is one node of a run's tree.
type Span struct {
	ID       string `json:"id"`
	RunID    string `json:"runId"`
	OrgID    string `json:"-"`
	TraceID  string `json:"traceId"`
	ChainID  string `json:"chainId,omitempty"`
	ParentID string `json:"parentId,omitempty"`
	// Attempt is the attempt of the run that made the span (1 for the first); 0 for the
	// dispatcher's spans, made before any attempt. A span reopened by a later attempt keeps
	// the attempt that made it.
	Attempt    int            `json:"attempt,omitempty"`
	Type       Type           `json:"type"`
	Name       string         `json:"name"`
	Status     Status         `json:"status"`
	StartedAt  time.Time      `json:"startedAt"`
	EndedAt    *time.Time     `json:"endedAt,omitempty"`
	DurationMS *float64       `json:"durationMs,omitempty"`
	Attributes map[string]any `json:"attributes"`
	Billing    *Billing       `json:"billing,omitempty"`
}

// Start returns a new running span.
func Start(runID, orgID, traceID, parentID string, typ Type, name string) *Span {
	return &Span{
		ID: ids.New(), RunID: runID, OrgID: orgID, TraceID: traceID, ParentID: parentID,
		Type: typ, Name: name, Status: Running, StartedAt: time.Now().UTC(), Attributes: map[string]any{},
	}
}

// End closes the span with a status.
func (s *Span) End(st Status) *Span {
	now := time.Now().UTC()
	s.EndedAt = &now
	s.Status = st
	d := float64(now.Sub(s.StartedAt).Microseconds()) / 1000
	s.DurationMS = &d
	return s
}

// Set adds an attribute and returns the span.
func (s *Span) Set(key string, v any) *Span {
	if s.Attributes == nil {
		s.Attributes = map[string]any{}
	}
	s.Attributes[key] = v
	return s
}

// DB is what Save needs of a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Save inserts the span or, when it exists, updates its end, status, attributes and billing.
func Save(ctx context.Context, db DB, s *Span) error {
	var sb Batch
	if err := sb.Add(s); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, saveAllSQL, sb.args()...); err != nil {
		return fmt.Errorf("saving %s span of run %s: %w", s.Type, s.RunID, err)
	}
	return nil
}

// Batch collects span writes for one statement. A span written twice keeps only its last
// state, so one that started and ended since the last write is inserted once, ended.
// Each span is encoded when added: later changes to it reach the next batch, not this one.
type Batch struct {
	index map[string]int
	cols  spanColumns
}

// spanColumns are a batch's spans column by column, as the arrays unnest takes.
type spanColumns struct {
	id, runID, orgID, traceID, typ, name, status []string
	chainID, parentID, provider, model           []*string
	started                                      []time.Time
	ended                                        []*time.Time
	attrs                                        []string
	in, out, cached                              []*int64
	cost                                         []*float64
	attempt                                      []int32
}

// Add records the span's current state in the batch.
func (sb *Batch) Add(s *Span) error {
	attrs, err := json.Marshal(s.Attributes)
	if err != nil {
		return fmt.Errorf("encoding %s span attributes: %w", s.Type, err)
	}
	var ended *time.Time
	if s.EndedAt != nil {
		e := *s.EndedAt
		ended = &e
	}
	var provider, model *string
	var in, out, cached *int64
	var cost *float64
	if s.Billing != nil {
		b := *s.Billing
		provider, model = &b.Provider, &b.Model
		in, out, cached, cost = &b.TokensIn, &b.TokensOut, &b.TokensCached, &b.CostUSD
	}
	sb.put(spanRow{id: s.ID, runID: s.RunID, orgID: s.OrgID, traceID: s.TraceID,
		chainID: optional(s.ChainID), parentID: optional(s.ParentID), typ: string(s.Type), name: s.Name,
		status: string(s.Status), started: s.StartedAt, ended: ended, attrs: string(attrs),
		provider: provider, model: model, in: in, out: out, cached: cached, cost: cost, attempt: int32(s.Attempt)})
	return nil
}

// Append adds the spans of other, as Add would have added each: one already in the batch
// takes other's state.
func (sb *Batch) Append(other *Batch) {
	for j := range other.cols.id {
		sb.put(other.row(j))
	}
}

// spanRow is one span of a batch, encoded.
type spanRow struct {
	id, runID, orgID, traceID, typ, name, status string
	chainID, parentID, provider, model           *string
	started                                      time.Time
	ended                                        *time.Time
	attrs                                        string
	in, out, cached                              *int64
	cost                                         *float64
	attempt                                      int32
}

// put adds a span, or updates the state of one the batch already has.
func (sb *Batch) put(r spanRow) {
	if sb.index == nil {
		sb.index = map[string]int{}
	}
	c := &sb.cols
	if i, ok := sb.index[r.id]; ok {
		c.status[i], c.ended[i], c.attrs[i] = r.status, r.ended, r.attrs
		c.provider[i], c.model[i], c.in[i], c.out[i], c.cached[i], c.cost[i] = r.provider, r.model, r.in, r.out, r.cached, r.cost
		return
	}
	sb.index[r.id] = len(c.id)
	c.id, c.runID, c.orgID, c.traceID = append(c.id, r.id), append(c.runID, r.runID), append(c.orgID, r.orgID), append(c.traceID, r.traceID)
	c.chainID, c.parentID = append(c.chainID, r.chainID), append(c.parentID, r.parentID)
	c.typ, c.name, c.status = append(c.typ, r.typ), append(c.name, r.name), append(c.status, r.status)
	c.started, c.ended, c.attrs = append(c.started, r.started), append(c.ended, r.ended), append(c.attrs, r.attrs)
	c.provider, c.model = append(c.provider, r.provider), append(c.model, r.model)
	c.in, c.out, c.cached, c.cost = append(c.in, r.in), append(c.out, r.out), append(c.cached, r.cached), append(c.cost, r.cost)
	c.attempt = append(c.attempt, r.attempt)
}

func (sb *Batch) row(j int) spanRow {
	c := &sb.cols
	return spanRow{id: c.id[j], runID: c.runID[j], orgID: c.orgID[j], traceID: c.traceID[j], chainID: c.chainID[j],
		parentID: c.parentID[j], typ: c.typ[j], name: c.name[j], status: c.status[j], started: c.started[j],
		ended: c.ended[j], attrs: c.attrs[j], provider: c.provider[j], model: c.model[j], in: c.in[j],
		out: c.out[j], cached: c.cached[j], cost: c.cost[j], attempt: c.attempt[j]}
}

// Len is the number of spans in the batch.
func (sb *Batch) Len() int { return len(sb.cols.id) }

// saveAllSQL takes the ids as text: pgx has no binary encoding of a []string as uuid[], and
// finding that out again on every call (an error formatted, then text) costs more than the
// casts. A span's attempt is written once, when it is inserted: the attempt that made it.
const saveAllSQL = `INSERT INTO spans (id, run_id, org_id, trace_id, chain_id, parent_id, type, name,
		status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt)
	SELECT id::uuid, run_id::uuid, org_id::uuid, trace_id::uuid, chain_id::uuid, parent_id::uuid, type, name,
		status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::jsonb[], $13::text[], $14::text[],
		$15::bigint[], $16::bigint[], $17::bigint[], $18::numeric[], $19::integer[])
		AS s(id, run_id, org_id, trace_id, chain_id, parent_id, type, name, status, started_at, ended_at,
			attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt)
	ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, ended_at = EXCLUDED.ended_at,
		attributes = EXCLUDED.attributes, provider = EXCLUDED.provider, model = EXCLUDED.model,
		tokens_in = EXCLUDED.tokens_in, tokens_out = EXCLUDED.tokens_out,
		tokens_cached = EXCLUDED.tokens_cached, cost_usd = EXCLUDED.cost_usd`

// Queue adds one statement writing every span of the batch to a pgx batch.
func (sb *Batch) Queue(b *pgx.Batch) {
	if sb.Len() == 0 {
		return
	}
	b.Queue(saveAllSQL, sb.args()...)
}

func (sb *Batch) args() []any {
	c := &sb.cols
	return []any{c.id, c.runID, c.orgID, c.traceID, c.chainID, c.parentID, c.typ, c.name, c.status,
		c.started, c.ended, c.attrs, c.provider, c.model, c.in, c.out, c.cached, c.cost, c.attempt}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// columns are the columns scan reads.
const columns = `id, run_id, trace_id, COALESCE(chain_id::text, ''), COALESCE(parent_id::text, ''), attempt,
	type, name, status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out,
	tokens_cached, cost_usd::float8`

// List returns the spans of one run, ordered by start. Only spans of orgID are returned.
func List(ctx context.Context, db DB, orgID, runID string) ([]Span, error) {
	return query(ctx, db, orgID, "listing spans of run "+runID,
		`SELECT `+columns+` FROM spans WHERE run_id = $1 AND org_id = $2 ORDER BY started_at, id`, runID, orgID)
}

// Abandon closes, in one statement, the spans that attempts of the run before attempt left
// running — their worker died — with status abandoned (attribute abandoned_by_attempt
// names the attempt that closed them), and returns them as closed. The dispatcher's spans
// (attempt 0) are not touched, nor a governance_review span that the run's journal names as
// the review of a pause for approval: that one waits for its reviewer across attempts and
// is closed with the decision.
func Abandon(ctx context.Context, db DB, orgID, runID string, attempt int) ([]Span, error) {
	return query(ctx, db, orgID, "closing abandoned spans of run "+runID,
		`UPDATE spans SET status = 'abandoned', ended_at = now(),
			attributes = attributes || jsonb_build_object('abandoned_by_attempt', $2::integer)
		WHERE run_id = $1 AND status = 'running' AND attempt BETWEEN 1 AND $2::integer - 1
			AND id::text NOT IN (SELECT data->>'review_span_id' FROM run_journal
				WHERE run_id = $1 AND kind = 'decision' AND data ? 'review_span_id')
		RETURNING `+columns, runID, attempt)
}

// query runs a statement returning spans of orgID (columns) and collects them.
func query(ctx context.Context, db DB, orgID, what, sql string, args ...any) ([]Span, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	spans, err := pgx.CollectRows(rows, scan(orgID))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return spans, nil
}

func scan(orgID string) pgx.RowToFunc[Span] {
	return func(r pgx.CollectableRow) (Span, error) {
		var s Span
		var provider, model *string
		var in, out, cached *int64
		var cost *float64
		err := r.Scan(&s.ID, &s.RunID, &s.TraceID, &s.ChainID, &s.ParentID, &s.Attempt, &s.Type, &s.Name, &s.Status,
			&s.StartedAt, &s.EndedAt, &s.Attributes, &provider, &model, &in, &out, &cached, &cost)
		if err != nil {
			return s, err
		}
		s.OrgID = orgID
		if s.EndedAt != nil {
			d := float64(s.EndedAt.Sub(s.StartedAt).Microseconds()) / 1000
			s.DurationMS = &d
		}
		if provider != nil || cost != nil {
			s.Billing = &Billing{Provider: deref(provider), Model: deref(model), TokensIn: deref(in),
				TokensOut: deref(out), TokensCached: deref(cached), CostUSD: deref(cost)}
		}
		return s, nil
	}
}

// Node is a span with its children, for the tree view.
type Node struct {
	Span
	Children []*Node `json:"children"`
}

// Tree arranges spans (ordered by start) into trees; spans whose parent is missing are roots.
func Tree(spans []Span) []*Node {
	nodes := make(map[string]*Node, len(spans))
	for i := range spans {
		nodes[spans[i].ID] = &Node{Span: spans[i], Children: []*Node{}}
	}
	roots := []*Node{}
	for i := range spans {
		n := nodes[spans[i].ID]
		if p, ok := nodes[n.ParentID]; ok && n.ParentID != "" {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
