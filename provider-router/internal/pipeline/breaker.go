package pipeline

import (
	"cmp"
	"context"
	"net/http"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Breaker passes each attempt through its endpoint's circuit breaker: an endpoint that
// failed repeatedly (5xx, network) is not called for a while, and the call is refused with
// 503 PROVIDER_CIRCUIT_OPEN instead.
type Breaker struct {
	Next     Chatter
	Breakers *breaker.Set
}

// Chat asks the breaker, calls on, and tells the breaker how the attempt went.
func (l *Breaker) Chat(ctx context.Context, call *Call) (*Result, error) {
	done, err := l.Breakers.Allow(endpoint(call.Route))
	if err != nil {
		return nil, apierr.New(http.StatusServiceUnavailable, apierr.CodeProviderCircuitOpen,
			"The provider endpoint failed repeatedly; the router stopped sending it calls for a while.",
			"The executor retries later; check the provider's status.").
			With("provider", call.Route.ProviderName).SetHeader("Retry-After", "5").Wrap(err)
	}
	res, err := l.Next.Chat(ctx, call)
	done(err)
	return res, err
}

// endpoint names a provider endpoint for its circuit breaker: calls of every
// organisation to the same URL share one breaker, because they share its health.
func endpoint(route routing.Route) string { return cmp.Or(route.BaseURL, string(route.Kind)) }

// NewBreakers returns the breaker set wired to m's breaker-state gauge.
func NewBreakers(opts breaker.Options, m *Metrics) *breaker.Set {
	prev := opts.OnStateChange
	opts.OnStateChange = func(endpoint string, from, to breaker.State) {
		m.BreakerState(endpoint, to)
		if prev != nil {
			prev(endpoint, from, to)
		}
	}
	return breaker.New(opts)
}
