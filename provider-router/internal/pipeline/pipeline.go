// Package pipeline is the provider router's chat call as a chain of links. Each
// cross-cutting concern — metrics, the step hand-off, routing, residency, cost ceilings,
// the output estimate, the token quota, credentials, the usage ledger, retries, rate
// limits, the circuit breaker — is a small type in its own file that implements Chatter
// and calls the next link; the last link calls the provider's adapter. New assembles the
// chain in the order the router has always applied them (docs/router.md draws it); the
// HTTP handler only parses the request into a Call, hands it to the chain and writes the
// answer.
//
// Why not provider.Adapter: a link needs more than Adapter.Chat(ctx, request) carries — the
// organisation, run, step, deadline, priority and capacity wait of the call going in, and
// the answer's cost, wait, latency and post-answer bookkeeping coming out — and the adapter
// is only known once the route is. Call and Result carry that explicitly; AsAdapter shows
// the whole chain as a provider.Adapter again for the conformance suite.
package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
)

// Chatter is one link of the chain: it does its part of a call and hands it on.
type Chatter interface {
	Chat(ctx context.Context, call *Call) (*Result, error)
}

// Call is one chat call on its way through the chain: what the caller asked for (filled
// by the server from the request's body and headers, shared/aichat), and below that what
// outer links found out for the inner ones. A Call belongs to one request; links run one
// after another, so it needs no lock.
type Call struct {
	Req     openai.ChatCompletionRequest
	Arrived time.Time // when the request arrived: the request duration starts here

	OrgID, JobID, ChainID, UserID, JobType string
	StepKey                                string // with JobID: the (job, step) pair answered once
	SpanID                                 string // X-Span-ID: the caller's llm_call span, for the ledger only
	Hint, ModelOverride, Preference        string // routing inputs; ModelOverride falls back to the body's model
	Provider                               string // X-Provider: pinned to this provider, past the policy
	Residency                              string
	Priority                               int           // limiter.PriorityCritical..PriorityLow
	Deadline                               time.Time     // X-Deadline, else arrival + the router's MaxWait
	MaxWait                                time.Duration // X-Capacity-Wait-MS; 0: wait up to Deadline
	RunCeiling                             *float64      // X-Cost-Ceiling-USD; nil: none
	QueueWait                              time.Duration // X-Queue-Wait-MS, for the ledger
	ChainPending                           int           // X-Chain-Pending: the chain's steps not yet dispatched

	// Stream, when set, makes the call a streamed one that passes each chunk to it. The
	// router's handler never sets it; the conformance suite does (AsAdapter).
	Stream provider.StreamFunc

	// Found out on the way in.
	Step         *handoff.Call    // Step: the pair's claim; nil without a step key
	CutOff       []string         // Step: tokens of the pair's calls cut off by their router's death, to record (Ledger)
	Route        routing.Route    // Route
	Price        pricing.Price    // Budget
	Priced       bool             // Budget: Price is known
	PromptTokens int              // Budget
	Tokens       int              // Estimate: prompt plus expected output tokens
	Adapter      provider.Adapter // Credential
	Waited       time.Duration    // RateLimit: the wait for capacity over all attempts
	Latency      time.Duration    // Upstream: the last attempt's time at the provider
	streamed     bool             // Upstream: a chunk reached Stream, so no retry
}

// Result is a call's answer.
type Result struct {
	// Resp is the provider's answer; nil for a replayed one.
	Resp *provider.Response
	// Body is the router's answer as it is written: the provider's answer with billing
	// (Ledger), or the pair's stored answer (Step).
	Body []byte
	// Replayed says Body is a stored answer and no provider was called.
	Replayed bool
	// What the ledger charged.
	In, Out, Cached int64
	CostUSD         float64

	after []func(context.Context)
}

// Then queues bookkeeping to run after the answer was written (Settle): returning
// capacity, correcting an estimate. Holding a reservation a few milliseconds longer errs
// on the safe side, and the caller does not wait for it.
func (r *Result) Then(f func(context.Context)) { r.after = append(r.after, f) }

// Settle runs the queued bookkeeping, innermost link first. ctx must not be the caller's.
func (r *Result) Settle(ctx context.Context) {
	for _, f := range r.after {
		f(ctx)
	}
}

// Pending says whether Settle has anything to do.
func (r *Result) Pending() bool { return len(r.after) > 0 }

// Parts are what the chain is made of. Zero-valued optional parts leave their link out:
// no Handoff, no hand-off (X-Step-Key is not acted on); no Budget, no ceilings or quota; no
// Estimator, the output prior; no Credentials, no provider keys; no Limiter, no rate
// limits; no Breakers, no breaker; no Metrics, no metrics. Routes, Prices and Ledger are
// required.
type Parts struct {
	Log              *slog.Logger
	Metrics          *Metrics
	Handoff          *handoff.Store
	Routes           *routing.Resolver
	Prices           *pricing.Table
	Budget           *budget.Guard
	DefaultMaxTokens int
	Estimator        *estimate.Estimator
	Credentials      *credential.Store
	HTTPClient       *http.Client
	Ledger           *ledger.Writer
	Retry            Retry
	Limiter          *limiter.Limiter
	QueueOrder       QueueOrder // of the Limiter's waiters; zero: OrderProgress
	Breakers         *breaker.Set
}

// New assembles the chain, outermost link first:
//
//	Measure → Step → Route → Residency → Budget → Estimate → Quota → Credential →
//	Ledger → Retry → RateLimit → Breaker → MeasureAttempt → Upstream
//
// Everything that can refuse a call without cost (residency, ceilings, quota) does so
// before it waits for capacity; the ledger records only a call the provider answered;
// each retried attempt waits for capacity and passes the breaker again.
func New(p Parts) Chatter {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var c Chatter = Upstream{}
	c = &MeasureAttempt{Next: c, Metrics: p.Metrics}
	if p.Breakers != nil {
		c = &Breaker{Next: c, Breakers: p.Breakers}
	}
	if p.Limiter != nil {
		c = &RateLimit{Next: c, Limiter: p.Limiter, Log: log, Order: p.QueueOrder}
	}
	c = &Retrier{Next: c, Policy: p.Retry, Log: log}
	c = &Ledger{Next: c, Writer: p.Ledger, Store: p.Handoff, Log: log}
	c = &Credential{Next: c, Store: p.Credentials, HTTPClient: p.HTTPClient}
	if p.Budget != nil {
		c = &Quota{Next: c, Guard: p.Budget, Log: log}
	}
	c = &Estimate{Next: c, Estimator: p.Estimator, Log: log}
	c = &Budget{Next: c, Guard: p.Budget, Prices: p.Prices, DefaultMaxTokens: p.DefaultMaxTokens, Log: log}
	c = &Residency{Next: c}
	c = &Route{Next: c, Routes: p.Routes}
	if p.Handoff != nil {
		c = &Step{Next: c, Store: p.Handoff, Ledger: p.Ledger, Log: log, Metrics: p.Metrics}
	}
	return &Measure{Next: c, Metrics: p.Metrics}
}
