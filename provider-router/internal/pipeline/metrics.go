package pipeline

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Metrics are the router's Prometheus series: per provider and model the latency, tokens,
// cost and upstream answers (429s included); the breaker state per endpoint; refusals by
// code; and, through Limiter, bucket headroom, queue length and wait times. Every method
// is safe on a nil *Metrics (metrics off).
type Metrics struct {
	gatherer prometheus.Gatherer
	// Limiter is what the limiter reports into (limiter.Options.Metrics).
	Limiter *limiter.PrometheusMetrics
	// Ledger is what the usage ledger reports into (ledger.Options.Metrics).
	Ledger *ledger.PrometheusMetrics

	duration *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	answers  *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	breaker  *prometheus.GaugeVec
	refusals *prometheus.CounterVec
	steps    *prometheus.CounterVec
}

// NewMetrics registers the router's series (and the Go runtime's) on a new registry.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	pm := []string{"provider", "model"}
	m := &Metrics{
		gatherer: reg,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_router_request_duration_seconds",
			Help:    "Time from a chat call's arrival to its answer, by provider, model and outcome (ok or the error code).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"provider", "model", "outcome"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_router_upstream_duration_seconds",
			Help:    "Time of each provider call (one attempt).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, pm),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_upstream_responses_total",
			Help: "Provider answers by HTTP status (0: network failure); status=\"429\" counts upstream rate-limit refusals.",
		}, []string{"provider", "model", "status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_tokens_total",
			Help: "Tokens billed, by direction (in, out, cached).",
		}, []string{"provider", "model", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_cost_usd_total",
			Help: "Money spent on provider calls, in USD.",
		}, pm),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_router_breaker_state",
			Help: "Circuit breaker per provider endpoint: 0 closed, 1 half-open, 2 open.",
		}, []string{"endpoint"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_refusals_total",
			Help: "Calls refused before or instead of reaching a provider, by error code (locks, budget, quota, limits, residency, routing).",
		}, []string{"code"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_step_calls_total",
			Help: "Calls naming a (job, step) pair, by outcome: claimed (this call calls the provider), replayed (the pair's stored answer), awaited (the answer of the pair's call in flight), taken_over (the call in flight failed or its replica died: this call calls the provider); cut_off (an earlier call of the pair cut off by its replica's death, recorded in the usage ledger with outcome unknown).",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.upstream, m.answers, m.tokens, m.cost, m.breaker, m.refusals, m.steps,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	lm, err := limiter.NewPrometheusMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.Limiter = lm
	if m.Ledger, err = ledger.NewPrometheusMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// Gatherer is what GET /metrics serves.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// LedgerMetrics returns what to hand ledger.Options.Metrics (nil-safe).
func (m *Metrics) LedgerMetrics() ledger.Metrics {
	if m == nil {
		return nil
	}
	return m.Ledger
}

// LimiterMetrics returns what to hand limiter.Options.Metrics (nil-safe).
func (m *Metrics) LimiterMetrics() limiter.Metrics {
	if m == nil {
		return nil
	}
	return m.Limiter
}

func (m *Metrics) observe(provider, model, outcome string, d time.Duration) {
	if m != nil {
		m.duration.WithLabelValues(provider, model, outcome).Observe(d.Seconds())
	}
}

func (m *Metrics) attempt(provider, model, status string, d time.Duration) {
	if m != nil {
		m.upstream.WithLabelValues(provider, model).Observe(d.Seconds())
		m.answers.WithLabelValues(provider, model, status).Inc()
	}
}

func (m *Metrics) billed(provider, model string, in, out, cached int64, cost float64) {
	if m != nil {
		m.tokens.WithLabelValues(provider, model, "in").Add(float64(in))
		m.tokens.WithLabelValues(provider, model, "out").Add(float64(out))
		m.tokens.WithLabelValues(provider, model, "cached").Add(float64(cached))
		m.cost.WithLabelValues(provider, model).Add(cost)
	}
}

// BreakerState sets an endpoint's breaker gauge.
func (m *Metrics) BreakerState(endpoint string, s breaker.State) {
	if m == nil {
		return
	}
	v := 0.0
	switch s {
	case breaker.HalfOpen:
		v = 1
	case breaker.Open:
		v = 2
	}
	m.breaker.WithLabelValues(endpoint).Set(v)
}

// step counts what the hand-off store found for a call naming a pair.
func (m *Metrics) step(r handoff.Result) {
	if m == nil {
		return
	}
	outcome := "claimed"
	switch {
	case r.Answer != nil && r.Waited:
		outcome = "awaited"
	case r.Answer != nil:
		outcome = "replayed"
	case r.Waited:
		outcome = "taken_over"
	}
	m.steps.WithLabelValues(outcome).Inc()
	if n := len(r.CutOff); n > 0 {
		// Calls of the step a router's death cut off, recorded now with outcome unknown.
		m.steps.WithLabelValues("cut_off").Add(float64(n))
	}
}

// Refused counts a call refused before or instead of reaching a provider (the locks use
// their own codes, e.g. FORBIDDEN_MTLS).
func (m *Metrics) Refused(code string) {
	if m != nil {
		m.refusals.WithLabelValues(code).Inc()
	}
}

// Done records a call's end: its duration since it arrived, by provider and model (empty
// until Route found them) and outcome — "ok" or the error's code, which is also counted
// as a refusal. The handler calls it for a request it could not parse; Measure for the rest.
func (m *Metrics) Done(call *Call, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = apierr.As(err).Code
		m.Refused(outcome)
	}
	m.observe(call.Route.ProviderName, call.Route.Model, outcome, time.Since(call.Arrived))
}

// Measure is the outermost link: every call's duration and outcome, and what an answered
// call was billed.
type Measure struct {
	Next    Chatter
	Metrics *Metrics
}

// Chat records the call's outcome around the rest of the chain.
func (l *Measure) Chat(ctx context.Context, call *Call) (res *Result, err error) {
	defer func() { l.Metrics.Done(call, err) }()
	res, err = l.Next.Chat(ctx, call)
	if err == nil && !res.Replayed {
		l.Metrics.billed(call.Route.ProviderName, call.Route.Model, res.In, res.Out, res.Cached, res.CostUSD)
	}
	return res, err
}

// MeasureAttempt sits on the adapter: each attempt's time at the provider and its answer's
// HTTP status (0: network failure). Failures that are not the provider's (a caller's
// stream callback) are not counted.
type MeasureAttempt struct {
	Next    Chatter
	Metrics *Metrics
}

// Chat records one attempt.
func (l *MeasureAttempt) Chat(ctx context.Context, call *Call) (*Result, error) {
	res, err := l.Next.Chat(ctx, call)
	route := call.Route
	if err == nil {
		l.Metrics.attempt(route.ProviderName, route.Model, "200", call.Latency)
	} else if pe, ok := errors.AsType[*provider.Error](err); ok {
		l.Metrics.attempt(route.ProviderName, route.Model, strconv.Itoa(pe.Status), call.Latency)
	}
	return res, err
}
