package limiter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics receives what the limiter sees. Implementations must be fast and safe for
// concurrent use: they are called on every admission attempt.
type Metrics interface {
	// Headroom reports a bucket after a script ran: requests and tokens that could be taken
	// (+Inf when unlimited, negative while an overrun is paid off) and calls waiting.
	Headroom(key BucketKey, requests, tokens float64, queued int)
	// Waited reports how long an Acquire waited and how it ended (Outcome*).
	Waited(key BucketKey, priority int, waited time.Duration, outcome string)
}

type nopMetrics struct{}

func (nopMetrics) Headroom(BucketKey, float64, float64, int)    {}
func (nopMetrics) Waited(BucketKey, int, time.Duration, string) {}

// PrometheusMetrics exports Metrics as Prometheus series labelled by credential id and
// model (ids, never secrets).
type PrometheusMetrics struct {
	requests *prometheus.GaugeVec
	tokens   *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	waited   *prometheus.HistogramVec
}

// NewPrometheusMetrics registers the limiter's series with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	labels := []string{"credential", "model"}
	m := &PrometheusMetrics{
		requests: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_ratelimit_requests_available",
			Help: "Requests the RPM bucket could admit now (+Inf: unlimited).",
		}, labels),
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_ratelimit_tokens_available",
			Help: "Tokens the TPM bucket could admit now (+Inf: unlimited; negative: overrun being repaid).",
		}, labels),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_ratelimit_queue_length",
			Help: "Calls waiting for the bucket, across all replicas.",
		}, labels),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_ratelimit_wait_seconds",
			Help:    "Time calls waited for admission, by priority and outcome.",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"credential", "model", "priority", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.tokens, m.queued, m.waited} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var priorityLabels = [...]string{"critical", "high", "normal", "low"}

// Headroom implements Metrics.
func (m *PrometheusMetrics) Headroom(key BucketKey, requests, tokens float64, queued int) {
	m.requests.WithLabelValues(key.Credential, key.Model).Set(requests)
	m.tokens.WithLabelValues(key.Credential, key.Model).Set(tokens)
	m.queued.WithLabelValues(key.Credential, key.Model).Set(float64(queued))
}

// Waited implements Metrics.
func (m *PrometheusMetrics) Waited(key BucketKey, priority int, waited time.Duration, outcome string) {
	p := "unknown"
	if priority >= 0 && priority < len(priorityLabels) {
		p = priorityLabels[priority]
	}
	m.waited.WithLabelValues(key.Credential, key.Model, p, outcome).Observe(waited.Seconds())
}
