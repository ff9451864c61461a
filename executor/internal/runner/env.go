package runner

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/event"
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
	if ok, err := journaled(ctx, x.DB, rn.ID, step, &prior); err != nil {
		return nil, err
	} else if ok {
		x.log.Info("llm answer replayed from journal", "step", step)
		return &prior.Answer, nil
	}

	sp := x.StartSpan(ctx, parentSpanID, span.LLMCall, "llm "+step)
	sp.Set("step", step).Set("routing_hint", x.skill.RoutingHint)
	x.Event(ctx, event.JobLLMCall, map[string]any{"step": step, "span_id": sp.ID,
		"routing_hint": x.skill.RoutingHint, "messages": len(req.Messages), "tools": len(req.Tools)})

	var queueWait int64
	if rn.QueuedAt != nil {
		queueWait = time.Since(*rn.QueuedAt).Milliseconds()
	}
	started := time.Now()
	ans, err := x.Router.Chat(ctx, routerclient.Job{
		OrgID: rn.OrgID, JobID: rn.ID, TraceID: rn.TraceID, UserID: rn.UserID, JobType: rn.JobType,
		ChainID: rn.ChainID, RoutingHint: x.skill.RoutingHint, ModelOverride: x.skill.ModelOverride,
		Residency: x.skill.DataResidency, Priority: rn.Priority, CostCeilingUSD: rn.CostCeilingUSD,
		QueueWaitMS: queueWait,
	}, req)
	if err != nil {
		sp.Set("error", errorCode(err))
		x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return nil, err
	}
	sp.Set("latency_ms", float64(time.Since(started).Microseconds())/1000)

	// Journal the answer and add it to the run's totals in one transaction, before anything
	// else happens: a retry from here on replays it instead of paying for it again.
	var total billing
	err = pgx.BeginFunc(context.WithoutCancel(ctx), x.DB, func(tx pgx.Tx) error {
		inserted, err := journal(ctx, tx, rn.ID, step, "llm_answer", llmEntry{SpanID: sp.ID, Answer: *ans})
		if err != nil || !inserted {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE runs SET tokens_in = tokens_in + $2, tokens_out = tokens_out + $3,
				tokens_cached = tokens_cached + $4, cost_usd = cost_usd + $5, llm_calls = llm_calls + 1
			WHERE id = $1 RETURNING tokens_in, tokens_out, cost_usd::float8, llm_calls`,
			rn.ID, ans.Usage.PromptTokens, ans.Usage.CompletionTokens, cachedTokens(ans), ans.CostUSD).
			Scan(&total.TokensIn, &total.TokensOut, &total.CostUSD, &total.LLMCalls)
	})
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

// saveSpan writes the span and emits job:span with the whole span. A span that cannot be
// written is logged, not fatal: spans describe the run, the journal and status decide it.
func (x *execution) saveSpan(ctx context.Context, sp *span.Span) {
	if err := span.Save(ctx, x.DB, sp); err != nil {
		x.log.Error("saving span", "span_type", sp.Type, "error", err)
		return
	}
	x.Event(ctx, event.JobSpan, sp)
}

// Event implements tier.Env.
func (x *execution) Event(ctx context.Context, typ string, data any) {
	if _, err := x.Events.Emit(ctx, x.DB, x.run.ID, x.run.OrgID, typ, data); err != nil {
		x.log.Warn("emitting event", "type", typ, "error", err)
	}
}
