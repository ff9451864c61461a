package pipeline

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// RateLimit admits each attempt into the shared RPM/TPM buckets of its (provider config,
// model), waiting in the priority queue up to the call's deadline or capacity wait
// (docs/rate-limits.md). A failed attempt's tokens are returned at once, its rate-limit
// headers observed and, on a 429, the bucket penalised for every replica; an answered
// attempt's admission is reconciled with the provider's usage after the answer.
type RateLimit struct {
	Next    Chatter
	Limiter *limiter.Limiter
	Log     *slog.Logger
	// Order is how waiters of equal priority are ordered; zero: OrderProgress.
	Order QueueOrder
}

// QueueOrder orders the calls of equal priority that wait for capacity.
type QueueOrder string

const (
	// OrderProgress groups a call with the other calls of its chain (X-Chain-ID), else of
	// its run (X-Job-ID): the group with the fewest calls outstanding goes first (seed 003).
	OrderProgress QueueOrder = "progress"
	// OrderFIFO makes every call a group of its own, so all tie on progress and wait in
	// arrival order: the baseline the progress order is measured against.
	OrderFIFO QueueOrder = "fifo"
	// OrderRemaining is OrderProgress with a chain's steps not yet dispatched
	// (X-Chain-Pending) counted with its calls outstanding: the chain with the fewest
	// calls left to make goes first.
	OrderRemaining QueueOrder = "remaining"
)

// pending is what the call tells the limiter of its group's later calls.
func (o QueueOrder) pending(call *Call) int {
	if o == OrderRemaining && call.ChainID != "" {
		return call.ChainPending
	}
	return 0
}

// group is the limiter's group of a call under the order: "" is a group of its own.
func (o QueueOrder) group(call *Call) string {
	if o == OrderFIFO {
		return ""
	}
	return cmp.Or(call.ChainID, call.JobID)
}

// Chat admits one attempt and calls on.
func (l *RateLimit) Chat(ctx context.Context, call *Call) (*Result, error) {
	key := limiter.BucketKey{Credential: call.Route.ProviderID, Model: call.Route.Model}
	adm, err := l.Limiter.Acquire(ctx, limiter.Request{
		Key: key, Tokens: call.Tokens, Priority: call.Priority, Group: l.Order.group(call), Pending: l.Order.pending(call),
		Deadline: call.Deadline, MaxWait: call.MaxWait,
	})
	if err != nil {
		return nil, limitError(call.Route, err)
	}
	call.Waited += adm.Waited()
	res, err := l.Next.Chat(ctx, call)
	if err != nil {
		bctx := context.WithoutCancel(ctx)
		if pe, ok := errors.AsType[*provider.Error](err); ok {
			// Fed back before the next attempt is admitted.
			l.observe(bctx, key, pe.RateLimit)
			if pe.Status == http.StatusTooManyRequests {
				// Every replica stops sending to this bucket until the provider's window reopens.
				if perr := l.Limiter.Penalize(bctx, key, pe.RetryAfter); perr != nil {
					l.Log.Warn("penalizing bucket", "bucket", key.String(), "error", perr)
				}
			}
		}
		// A refused or failed attempt consumed no tokens at the provider.
		if ferr := adm.Finish(bctx, 0); ferr != nil {
			l.Log.Warn("returning reserved tokens", "bucket", key.String(), "error", ferr)
		}
		return nil, err
	}
	res.Then(func(ctx context.Context) {
		l.observe(ctx, key, res.Resp.RateLimit)
		used := res.Resp.Usage.PromptTokens + res.Resp.Usage.CompletionTokens
		if err := adm.Finish(ctx, used); err != nil {
			l.Log.Warn("settling rate limit", "bucket", key.String(), "error", err)
		}
	})
	return res, nil
}

// observe feeds the provider's x-ratelimit-* headers into the bucket.
func (l *RateLimit) observe(ctx context.Context, key limiter.BucketKey, rl provider.RateLimit) {
	if _, err := l.Limiter.Observe(ctx, key, rl); err != nil {
		l.Log.Warn("observing rate-limit headers", "bucket", key.String(), "error", err)
	}
}

// limitError maps a failed admission.
func limitError(route routing.Route, err error) error {
	if de, ok := errors.AsType[*limiter.DeadlineError](err); ok {
		e := apierr.New(http.StatusTooManyRequests, apierr.CodeRateLimitDeadline,
			"The provider's rate limit leaves no capacity for this call before its deadline.",
			"Give the job a later deadline, raise its priority, or raise the provider limits.").
			With("provider", route.ProviderName, "model", route.Model, "waited_ms", de.Waited.Milliseconds(),
				"needed_ms", de.Needed.Milliseconds(), "ahead", de.Ahead).Wrap(err)
		if de.Needed > 0 {
			e.SetHeader("Retry-After", strconv.Itoa(int(de.Needed.Seconds()+0.999)))
		}
		return e
	}
	if be, ok := errors.AsType[*limiter.BusyError](err); ok {
		// Not a failure: the caller should free its worker and come back at its slot.
		return apierr.New(http.StatusTooManyRequests, apierr.CodeRateLimitWait,
			"The provider's rate limit has no capacity for this call within the caller's wait (X-Capacity-Wait-MS).",
			"Come back after retry_after_ms (Retry-After); the executor parks the run until then, holding no worker.").
			With("provider", route.ProviderName, "model", route.Model, "waited_ms", be.Waited.Milliseconds(),
				"ahead", be.Ahead, "retry_after_ms", be.RetryAfter.Milliseconds()).
			SetHeader("Retry-After", strconv.Itoa(int(be.RetryAfter.Seconds()+0.999))).Wrap(err).Expected()
	}
	if errors.Is(err, context.Canceled) {
		return apierr.New(499, apierr.CodeCancelled, "The caller went away.")
	}
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeRateLimiterUnavailable,
		"The router could not reach its shared rate-limit state.", "Retry; operators: check Redis.").Wrap(err)
}
