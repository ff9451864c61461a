package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
)

// Metrics are the router's Prometheus series: per provider and model the latency, tokens,
// cost and upstream answers (429s included); the breaker state per endpoint; refusals by
// code; and, through Limiter, bucket headroom, queue length and wait times. Every method
// is safe on a nil *Metrics (metrics off).
type Metrics struct {
	gatherer prometheus.Gatherer
	// Limiter is what the limiter reports into (limiter.Options.Metrics).
	Limiter *limiter.PrometheusMetrics

	duration *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	answers  *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	breaker  *prometheus.GaugeVec
	refusals *prometheus.CounterVec
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
	}
	for _, c := range []prometheus.Collector{m.duration, m.upstream, m.answers, m.tokens, m.cost, m.breaker, m.refusals,
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
	return m, nil
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

func (m *Metrics) breakerState(endpoint string, s breaker.State) {
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

func (m *Metrics) refused(code string) {
	if m != nil {
		m.refusals.WithLabelValues(code).Inc()
	}
}
