package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// llmEntry is the journal form of an LLM answer.
type llmEntry struct {
	SpanID string              `json:"span_id"`
	Answer routerclient.Answer `json:"answer"`
}

// Chat implements tier.Env: journal before effect, replay instead of calling again.
func (x *execution) Chat(ctx context.Context, step, parentSpanID string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	rn := x.run
	var prior llmEntry
	if ok, err := x.journaled(ctx, step, &prior); err != nil {
		return nil, err
	} else if ok {
		x.log.Info("llm answer replayed from journal", "step", step)
		return &prior.Answer, nil
	}

	sp := x.StartSpan(ctx, parentSpanID, span.LLMCall, "llm "+step)
	sp.Set("step", step).Set("routing_hint", x.skill.RoutingHint)
	x.Event(ctx, event.JobLLMCall, map[string]any{"step": step, "span_id": sp.ID,
		"routing_hint": x.skill.RoutingHint, "messages": len(req.Messages), "tools": len(req.Tools)})

	x.flush(ctx)
	var queueWait int64
	if rn.QueuedAt != nil {
		queueWait = time.Since(*rn.QueuedAt).Milliseconds()
	}
	started := time.Now()
	ans, err := x.Router.Chat(ctx, routerclient.Job{
		OrgID: rn.OrgID, JobID: rn.ID, TraceID: rn.TraceID, UserID: rn.UserID, JobType: rn.JobType,
		ChainID: rn.ChainID, RoutingHint: x.skill.RoutingHint, ModelOverride: x.skill.ModelOverride,
		Residency: x.skill.DataResidency, Priority: rn.Priority, CostCeilingUSD: rn.CostCeilingUSD,
		QueueWaitMS: queueWait, CapacityWait: x.capacityWait(),
	}, req)
	if err != nil {
		sp.Set("error", errorCode(err))
		x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return nil, err
	}
	sp.Set("latency_ms", float64(time.Since(started).Microseconds())/1000)

	// Journal the answer and add it to the run's totals in one statement, before anything
	// else happens: a retry from here on replays it instead of paying for it again. When the
	// step was journaled already (by an attempt racing this one) nothing is added twice.
	var total billing
	entry, err := json.Marshal(llmEntry{SpanID: sp.ID, Answer: *ans})
	if err == nil {
		err = x.DB.QueryRow(context.WithoutCancel(ctx), `WITH j AS (
				INSERT INTO run_journal (run_id, step_key, kind, data) VALUES ($1, $6, 'llm_answer', $7)
				ON CONFLICT (run_id, step_key) DO NOTHING RETURNING 1)
			UPDATE runs SET tokens_in = tokens_in + $2, tokens_out = tokens_out + $3,
				tokens_cached = tokens_cached + $4, cost_usd = cost_usd + $5, llm_calls = llm_calls + 1,
				waiting_since = NULL
			WHERE id = $1 AND EXISTS (SELECT 1 FROM j)
			RETURNING tokens_in, tokens_out, cost_usd::float8, llm_calls`,
			rn.ID, ans.Usage.PromptTokens, ans.Usage.CompletionTokens, cachedTokens(ans), ans.CostUSD, step, entry).
			Scan(&total.TokensIn, &total.TokensOut, &total.CostUSD, &total.LLMCalls)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err != nil {
		x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return nil, err
	}
	sp.Billing = &span.Billing{Provider: ans.Provider, Model: ans.Model, TokensIn: int64(ans.Usage.PromptTokens),
		TokensOut: int64(ans.Usage.CompletionTokens), TokensCached: cachedTokens(ans), CostUSD: ans.CostUSD}
	finish := ""
	if len(ans.Choices) > 0 {
		finish = string(ans.Choices[0].FinishReason)
	}
	x.EndSpan(ctx, sp.Set("finish_reason", finish), span.OK)
	x.Event(ctx, event.JobLLMResponse, map[string]any{"step": step, "span_id": sp.ID, "provider": ans.Provider,
		"model": ans.Model, "tokens_in": ans.Usage.PromptTokens, "tokens_out": ans.Usage.CompletionTokens,
		"cost_usd": ans.CostUSD, "finish_reason": finish, "cumulative": total})
	return ans, nil
}

func cachedTokens(a *routerclient.Answer) int64 {
	if a.Usage.PromptTokensDetails != nil {
		return int64(a.Usage.PromptTokensDetails.CachedTokens)
	}
	return 0
}

func errorCode(err error) string {
	code, _, _ := classify(err)
	return code
}

// StartSpan implements tier.Env.
func (x *execution) StartSpan(ctx context.Context, parentID string, typ span.Type, name string) *span.Span {
	sp := span.Start(x.run.ID, x.run.OrgID, x.run.TraceID, parentID, typ, name)
	sp.ChainID = x.run.ChainID
	x.saveSpan(ctx, sp)
	return sp
}

// EndSpan implements tier.Env.
func (x *execution) EndSpan(ctx context.Context, sp *span.Span, st span.Status) {
	x.saveSpan(ctx, sp.End(st))
}

// saveSpan records the span and its job:span event (carrying the whole span). Both are
// buffered and written by the next flush: spans describe the run, while the journal and the
// status decide it, so they need not cost a round trip each.
func (x *execution) saveSpan(ctx context.Context, sp *span.Span) {
	x.buf.mu.Lock()
	defer x.buf.mu.Unlock()
	if err := x.buf.spans.Add(sp); err != nil {
		x.log.Error("saving span", "span_type", sp.Type, "error", err)
		return
	}
	x.queueEvent(event.JobSpan, sp)
}

// Event implements tier.Env. The event is buffered until the next flush, which happens
// before every router and tool call and before the run's status changes, so events are
// journaled in order and no later than the effects they describe.
func (x *execution) Event(ctx context.Context, typ string, data any) {
	x.buf.mu.Lock()
	defer x.buf.mu.Unlock()
	x.queueEvent(typ, data)
}

func (x *execution) queueEvent(typ string, data any) {
	d, err := event.NewDraft(typ, data)
	if err != nil {
		x.log.Warn("emitting event", "type", typ, "error", err)
		return
	}
	x.buf.events = append(x.buf.events, d)
}

// writeBuffer holds spans and events not yet written.
type writeBuffer struct {
	mu     sync.Mutex
	spans  span.Batch
	events []event.Draft
}

// flush writes the buffered spans and events in one round trip and two statements (one
// implicit transaction), then publishes the events.
func (x *execution) flush(ctx context.Context) {
	x.buf.mu.Lock()
	spans, drafts := x.buf.spans, x.buf.events
	x.buf.spans, x.buf.events = span.Batch{}, nil
	x.buf.mu.Unlock()
	if spans.Len() == 0 && len(drafts) == 0 {
		return
	}
	b := &pgx.Batch{}
	spans.Queue(b)
	envs := event.QueueRecordAll(b, x.run.ID, x.run.OrgID, drafts)
	if err := x.DB.SendBatch(ctx, b).Close(); err != nil {
		x.log.Warn("writing spans and events", "error", err)
		return
	}
	if err := x.Events.Publish(ctx, envs...); err != nil {
		x.log.Warn("publishing events", "error", err)
	}
}

// finish ends the run, writing what is buffered in the same round trip.
func (x *execution) finish(ctx context.Context, log *slog.Logger, rn Run, st run.Status, output map[string]any,
	errBody json.RawMessage, warnings ...string) error {
	x.buf.mu.Lock()
	spans, drafts := x.buf.spans, x.buf.events
	x.buf.spans, x.buf.events = span.Batch{}, nil
	x.buf.mu.Unlock()
	return x.Runner.conclude(ctx, log, rn, &spans, drafts, st, output, errBody, warnings...)
}
