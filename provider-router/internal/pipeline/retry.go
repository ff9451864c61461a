package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Retry is the policy for provider failures that another attempt may fix (429, 5xx,
// network). Every attempt passes the rate limiter and the breaker again, and none starts
// when its wait would pass the call's deadline.
type Retry struct {
	// Attempts is the most provider calls per request; default 4.
	Attempts int
	// Backoff is the first pause after a failure, doubled per attempt with jitter; a
	// provider's Retry-After wins when longer. Default 200 ms.
	Backoff time.Duration
	// MaxBackoff caps the pause; default 5 s.
	MaxBackoff time.Duration
}

// Retrier repeats what another attempt may fix, and turns the provider's last failure into
// the router's answer (providerError). It sits outside the rate limiter and the breaker,
// so each attempt takes a fresh admission and passes the breaker; a link's own refusal
// (an *apierr.Error: no capacity, circuit open) is passed on as it is, never retried.
type Retrier struct {
	Next   Chatter
	Policy Retry
	Log    *slog.Logger
}

// Chat calls on until an attempt succeeds, fails for good, or the next would pass the
// call's deadline.
func (l *Retrier) Chat(ctx context.Context, call *Call) (*Result, error) {
	attempts := cmp.Or(l.Policy.Attempts, 4)
	route := call.Route
	for attempt := 1; ; attempt++ {
		res, err := l.Next.Chat(ctx, call)
		if err == nil {
			return res, nil
		}
		if _, refused := errors.AsType[*apierr.Error](err); refused {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, apierr.New(499, apierr.CodeCancelled, "The caller went away.").Wrap(err)
		}
		pe, _ := errors.AsType[*provider.Error](err)
		if pe == nil || !pe.Retryable || attempt >= attempts || call.streamed {
			return nil, providerError(route, err)
		}
		pause := max(backoff(l.Policy, attempt), pe.RetryAfter)
		if time.Now().Add(pause).After(call.Deadline) {
			return nil, providerError(route, err)
		}
		l.Log.Debug("retrying provider call", "provider", route.ProviderName, "model", route.Model,
			"attempt", attempt, "pause", pause.String(), "error", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, apierr.New(499, apierr.CodeCancelled, "The caller went away.")
		case <-t.C:
		}
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

// providerError maps an adapter failure to the router's answer. Retryable failures are
// 502/503/429 so the executor retries; the rest are PROVIDER_REJECTED.
func providerError(route routing.Route, err error) error {
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		return apierr.New(http.StatusBadGateway, apierr.CodeProviderUnavailable, "The provider could not be reached.",
			"The executor retries with backoff; check the provider's status.").
			With("provider", route.ProviderName).Wrap(err)
	}
	ctx := []any{"provider", route.ProviderName, "model", route.Model, "provider_status", pe.Status, "provider_code", pe.Code}
	switch {
	case pe.Status == http.StatusTooManyRequests:
		e := apierr.New(http.StatusTooManyRequests, apierr.CodeProviderRateLimited, "The provider refused the call for its rate limit.",
			"The executor retries after the delay in Retry-After.").With(ctx...).Wrap(err)
		if pe.RetryAfter > 0 {
			e.SetHeader("Retry-After", strconv.Itoa(int(pe.RetryAfter.Seconds()+0.999)))
		}
		return e
	case pe.Retryable:
		return apierr.New(http.StatusBadGateway, apierr.CodeProviderUnavailable, "The provider failed to answer.",
			"The executor retries with backoff; check the provider's status.").With(ctx...).Wrap(err)
	}
	if pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden {
		return apierr.New(http.StatusBadGateway, apierr.CodeProviderRejected,
			fmt.Sprintf("Provider %s refused the API key (HTTP %d): %s", route.ProviderName, pe.Status, pe.Message),
			"An admin sets the right key: `yard providers set-key "+route.ProviderName+"`, then `yard providers test "+route.ProviderName+"`.").
			With(ctx...).Wrap(err)
	}
	return apierr.New(http.StatusBadGateway, apierr.CodeProviderRejected,
		fmt.Sprintf("Provider %s rejected the request (HTTP %d): %s", route.ProviderName, pe.Status, pe.Message),
		"Check the skill's model and prompt; retrying will not help.").With(ctx...).Wrap(err)
}
