package server

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// upstream is a successful provider call: the answer, its admission (to reconcile and
// release), how long the call waited for capacity in all and how long the last attempt took.
type upstream struct {
	resp    *provider.Response
	res     *limiter.Reservation
	waited  time.Duration
	latency time.Duration
}

// endpoint names a provider endpoint for its circuit breaker: calls of every
// organisation to the same URL share one breaker, because they share its health.
func endpoint(route routing.Route) string { return cmp.Or(route.BaseURL, string(route.Kind)) }

// call admits and sends one request, retrying what another attempt may fix. Each attempt
// takes a fresh admission (a failed attempt's is released at once, its tokens returned)
// and passes the endpoint's breaker. On success the reservation is left for the caller
// to reconcile and release.
func (s *Server) call(ctx context.Context, route routing.Route, adapter provider.Adapter,
	req openai.ChatCompletionRequest, lreq limiter.Request) (*upstream, error) {
	attempts := cmp.Or(s.Retry.Attempts, 4)
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		var res *limiter.Reservation
		if s.Limiter != nil {
			var err error
			res, err = s.Limiter.Acquire(ctx, lreq)
			if err != nil {
				return nil, limitError(route, err)
			}
			waited += res.Waited()
		}
		done := func(error) {}
		if s.Breakers != nil {
			var err error
			if done, err = s.Breakers.Allow(endpoint(route)); err != nil {
				s.giveBack(ctx, res)
				return nil, apierr.New(http.StatusServiceUnavailable, "PROVIDER_CIRCUIT_OPEN",
					"The provider endpoint failed repeatedly; the router stopped sending it calls for a while.",
					"The executor retries later; check the provider's status.").
					With("provider", route.ProviderName).SetHeader("Retry-After", "5").Wrap(err)
			}
		}
		started := time.Now()
		resp, err := adapter.Chat(ctx, req)
		latency := time.Since(started)
		done(err)
		pe, _ := errors.AsType[*provider.Error](err)
		switch {
		case err == nil:
			s.Metrics.attempt(route.ProviderName, route.Model, "200", latency)
		case pe != nil:
			s.Metrics.attempt(route.ProviderName, route.Model, strconv.Itoa(pe.Status), latency)
		}
		if err == nil {
			// The answer's rate-limit headers are fed back after the answer is sent
			// (Server.chat): a refused attempt's before the next one is admitted.
			return &upstream{resp: resp, res: res, waited: waited, latency: latency}, nil
		}
		if s.Limiter != nil && pe != nil {
			if _, oerr := s.Limiter.Observe(context.WithoutCancel(ctx), lreq.Key, pe.RateLimit); oerr != nil {
				s.Log.Warn("observing rate-limit headers", "bucket", lreq.Key.String(), "error", oerr)
			}
		}
		if pe != nil && pe.Status == http.StatusTooManyRequests && s.Limiter != nil {
			// Every replica stops sending to this bucket until the provider's window reopens.
			if perr := s.Limiter.Penalize(context.WithoutCancel(ctx), lreq.Key, pe.RetryAfter); perr != nil {
				s.Log.Warn("penalizing bucket", "bucket", lreq.Key.String(), "error", perr)
			}
		}
		// A refused or failed attempt consumed no tokens at the provider.
		s.giveBack(ctx, res)
		if ctx.Err() != nil {
			return nil, apierr.New(499, "CANCELLED", "The caller went away.").Wrap(err)
		}
		if pe == nil || !pe.Retryable || attempt >= attempts {
			return nil, providerError(route, err)
		}
		pause := backoff(s.Retry, attempt)
		if pe != nil && pe.RetryAfter > pause {
			pause = pe.RetryAfter
		}
		if time.Now().Add(pause).After(lreq.Deadline) {
			return nil, providerError(route, err)
		}
		s.Log.Debug("retrying provider call", "provider", route.ProviderName, "model", route.Model,
			"attempt", attempt, "pause", pause.String(), "error", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, apierr.New(499, "CANCELLED", "The caller went away.")
		case <-t.C:
		}
	}
}

// giveBack returns an attempt's reserved tokens and ends its admission.
func (s *Server) giveBack(ctx context.Context, res *limiter.Reservation) {
	if res == nil {
		return
	}
	if err := res.Finish(context.WithoutCancel(ctx), 0); err != nil {
		s.Log.Warn("returning reserved tokens", "bucket", res.Key.String(), "error", err)
	}
}

// backoff is the pause after the attempt-th failure: exponential with full jitter in its
// upper half, so replicas retrying together spread out.
func backoff(r Retry, attempt int) time.Duration {
	base, ceil := cmp.Or(r.Backoff, 200*time.Millisecond), cmp.Or(r.MaxBackoff, 5*time.Second)
	d := base << min(attempt-1, 20)
	if d > ceil || d <= 0 {
		d = ceil
	}
	return d/2 + rand.N(d/2+1)
}

// limitError maps a failed admission.
func limitError(route routing.Route, err error) error {
	if de, ok := errors.AsType[*limiter.DeadlineError](err); ok {
		e := apierr.New(http.StatusTooManyRequests, "RATE_LIMIT_DEADLINE",
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
		return apierr.New(http.StatusTooManyRequests, "RATE_LIMIT_WAIT",
			"The provider's rate limit has no capacity for this call within the caller's wait (X-Capacity-Wait-MS).",
			"Come back after retry_after_ms (Retry-After); the executor parks the run until then, holding no worker.").
			With("provider", route.ProviderName, "model", route.Model, "waited_ms", be.Waited.Milliseconds(),
				"ahead", be.Ahead, "retry_after_ms", be.RetryAfter.Milliseconds()).
			SetHeader("Retry-After", strconv.Itoa(int(be.RetryAfter.Seconds()+0.999))).Wrap(err).Expected()
	}
	if errors.Is(err, context.Canceled) {
		return apierr.New(499, "CANCELLED", "The caller went away.")
	}
	return apierr.New(http.StatusServiceUnavailable, "RATE_LIMITER_UNAVAILABLE",
		"The router could not reach its shared rate-limit state.", "Retry; operators: check Redis.").Wrap(err)
}

// providerError maps an adapter failure to the router's answer. Retryable failures are
// 502/503/429 so the executor retries; the rest are PROVIDER_REJECTED.
func providerError(route routing.Route, err error) error {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		return apierr.New(http.StatusBadGateway, "PROVIDER_UNAVAILABLE", "The provider could not be reached.",
			"The executor retries with backoff; check the provider's status.").
			With("provider", route.ProviderName).Wrap(err)
	}
	ctx := []any{"provider", route.ProviderName, "model", route.Model, "provider_status", pe.Status, "provider_code", pe.Code}
	switch {
	case pe.Status == http.StatusTooManyRequests:
		e := apierr.New(http.StatusTooManyRequests, "PROVIDER_RATE_LIMITED", "The provider refused the call for its rate limit.",
			"The executor retries after the delay in Retry-After.").With(ctx...).Wrap(err)
		if pe.RetryAfter > 0 {
			e.SetHeader("Retry-After", strconv.Itoa(int(pe.RetryAfter.Seconds()+0.999)))
		}
		return e
	case pe.Retryable:
		return apierr.New(http.StatusBadGateway, "PROVIDER_UNAVAILABLE", "The provider failed to answer.",
			"The executor retries with backoff; check the provider's status.").With(ctx...).Wrap(err)
	}
	return apierr.New(http.StatusBadGateway, "PROVIDER_REJECTED", "The provider rejected the request: "+pe.Message,
		"Check the skill's model and prompt; retrying will not help.").With(ctx...).Wrap(err)
}
