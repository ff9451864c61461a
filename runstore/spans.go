package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/span"
)

// SaveSpan inserts the span or, when it exists, updates its end, status, attributes and
// billing.
func (s *Store) SaveSpan(ctx context.Context, sp *span.Span) error {
	var sb SpanBatch
	if err := sb.Add(sp); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, saveSpansSQL, sb.args()...); err != nil {
		return fmt.Errorf("saving %s span of run %s: %w", sp.Type, sp.RunID, err)
	}
	return nil
}

// SpanBatch collects span writes for one statement. A span written twice keeps only its last
// state, so one that started and ended since the last write is inserted once, ended.
// Each span is encoded when added: later changes to it reach the next batch, not this one.
type SpanBatch struct {
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
func (sb *SpanBatch) Add(s *span.Span) error {
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
func (sb *SpanBatch) Append(other *SpanBatch) {
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
func (sb *SpanBatch) put(r spanRow) {
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

func (sb *SpanBatch) row(j int) spanRow {
	c := &sb.cols
	return spanRow{id: c.id[j], runID: c.runID[j], orgID: c.orgID[j], traceID: c.traceID[j], chainID: c.chainID[j],
		parentID: c.parentID[j], typ: c.typ[j], name: c.name[j], status: c.status[j], started: c.started[j],
		ended: c.ended[j], attrs: c.attrs[j], provider: c.provider[j], model: c.model[j], in: c.in[j],
		out: c.out[j], cached: c.cached[j], cost: c.cost[j], attempt: c.attempt[j]}
}

// Len is the number of spans in the batch.
func (sb *SpanBatch) Len() int { return len(sb.cols.id) }

// Queue adds one statement writing every span of the batch to a pgx batch.
func (sb *SpanBatch) Queue(b *pgx.Batch) {
	if sb.Len() == 0 {
		return
	}
	b.Queue(saveSpansSQL, sb.args()...)
}

func (sb *SpanBatch) args() []any {
	c := &sb.cols
	return []any{c.id, c.runID, c.orgID, c.traceID, c.chainID, c.parentID, c.typ, c.name, c.status,
		c.started, c.ended, c.attrs, c.provider, c.model, c.in, c.out, c.cached, c.cost, c.attempt}
}

// ListSpans returns the spans of one run, ordered by start. Only spans of orgID are
// returned.
func (s *Store) ListSpans(ctx context.Context, orgID, runID string) ([]span.Span, error) {
	return querySpans(ctx, s.db, orgID, "listing spans of run "+runID, listSpansSQL, runID, orgID)
}

// AbandonSpans closes, in one statement, the spans that attempts of the run before attempt
// left running — their worker died — with status abandoned (attribute abandoned_by_attempt
// names the attempt that closed them), and returns them as closed. The dispatcher's spans
// (attempt 0) are not touched, nor a governance_review span that the run's journal names as
// the review of a pause for approval: that one waits for its reviewer across attempts and
// is closed with the decision.
func (s *Store) AbandonSpans(ctx context.Context, orgID, runID string, attempt int) ([]span.Span, error) {
	return querySpans(ctx, s.db, orgID, "closing abandoned spans of run "+runID, abandonSpansSQL, runID, attempt)
}

// querySpans runs a statement returning spans of orgID (columns) and collects them.
func querySpans(ctx context.Context, db DB, orgID, what, sql string, args ...any) ([]span.Span, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	spans, err := pgx.CollectRows(rows, scanSpan(orgID))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return spans, nil
}

func scanSpan(orgID string) pgx.RowToFunc[span.Span] {
	return func(r pgx.CollectableRow) (span.Span, error) {
		var s span.Span
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
			s.Billing = &span.Billing{Provider: deref(provider), Model: deref(model), TokensIn: deref(in),
				TokensOut: deref(out), TokensCached: deref(cached), CostUSD: deref(cost)}
		}
		return s, nil
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
