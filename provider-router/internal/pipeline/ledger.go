package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// answer is the router's response body: the provider's answer with its billing.
type answer struct {
	openai.ChatCompletionResponse
	aichat.Billing
}

// Ledger charges each answered call at call.Price and records it in the usage ledger
// before the answer can be written: the entry is stored durably — and, for a step's call,
// the answer handed to repeated calls of the pair (Step), in the same Redis round trip —
// so a router that dies right after answering loses neither. The record does not wait for
// a caller that went away. It sets the Result's Body and what was charged.
type Ledger struct {
	Next   Chatter
	Writer *ledger.Writer
	// Store and Log, with a hand-off store: the calls of the step cut off by their router's
	// death (Call.CutOff) are recorded in the answer's round trip.
	Store *handoff.Store
	Log   *slog.Logger
}

// Chat calls on and records what the provider's answer cost.
func (l *Ledger) Chat(ctx context.Context, call *Call) (*Result, error) {
	res, err := l.Next.Chat(ctx, call)
	if err != nil {
		return nil, err
	}
	route, resp := call.Route, res.Resp
	if resp.Model == "" {
		resp.Model = route.Model
	}
	if d := resp.Usage.PromptTokensDetails; d != nil {
		res.Cached = int64(d.CachedTokens)
	}
	res.In, res.Out = int64(resp.Usage.PromptTokens), int64(resp.Usage.CompletionTokens)
	if call.Priced {
		res.CostUSD = call.Price.Cost(res.In, res.Out, res.Cached)
	}
	body, err := json.Marshal(answer{ChatCompletionResponse: resp.ChatCompletionResponse,
		Billing: aichat.Billing{Provider: route.ProviderName, CostUSD: res.CostUSD}})
	if err != nil {
		res.Settle(context.WithoutCancel(ctx))
		return nil, apierr.Internal(err)
	}
	res.Body = body
	entry := ledger.Entry{
		CallKey: ledger.CallKey(call.JobID, call.StepKey, call.Step.Token()), StepKey: call.StepKey, SpanID: call.SpanID,
		OrgID: call.OrgID, UserID: call.UserID, RunID: call.JobID, ChainID: call.ChainID, JobType: call.JobType,
		Provider: route.ProviderName, Model: route.Model, TokensIn: res.In, TokensOut: res.Out, TokensCached: res.Cached,
		CostUSD: res.CostUSD, Latency: call.Latency, QueueWait: call.QueueWait + call.Waited,
	}
	bctx := context.WithoutCancel(ctx)
	entries, also := []ledger.Entry{entry}, []func(redis.Pipeliner){call.Step.Finish(bctx, body)}
	if len(call.CutOff) > 0 {
		cut, closeCut := cutOff(bctx, l.Store, l.Log, call)
		entries, also = append(entries, cut...), append(also, closeCut...)
	}
	l.Writer.RecordAll(bctx, entries, also...)
	return res, nil
}
