package ledger

import "github.com/prometheus/client_golang/prometheus"

// Where Record put an entry (Metrics.Recorded).
const (
	PathStream   = "stream"   // the Redis stream: the normal path
	PathPostgres = "postgres" // Redis refused it: written to Postgres at once
	PathMemory   = "memory"   // both refused it: held in memory and retried
)

// What became of a moved entry (Metrics.Moved).
const (
	MovedInserted  = "inserted"  // a new row
	MovedDuplicate = "duplicate" // its call key was already in the ledger
	MovedDead      = "dead"      // Postgres refused it as invalid: kept in the dead-letter stream
)

// Metrics receives what the ledger does. Implementations must be safe for concurrent use.
type Metrics interface {
	// Recorded reports where Record put an entry (Path*).
	Recorded(path string)
	// Moved reports n entries moved from the stream with one outcome (Moved*).
	Moved(outcome string, n int)
	// MoveFailed reports a failed attempt to write a batch to Postgres (it is retried).
	MoveFailed()
	// Backlog reports the entries in the stream not yet in Postgres.
	Backlog(n int64)
	// Held reports the entries only this process holds, in memory (both stores refused them).
	Held(n int)
}

type nopMetrics struct{}

func (nopMetrics) Recorded(string)   {}
func (nopMetrics) Moved(string, int) {}
func (nopMetrics) MoveFailed()       {}
func (nopMetrics) Backlog(int64)     {}
func (nopMetrics) Held(int)          {}

// PrometheusMetrics exports Metrics as Prometheus series.
type PrometheusMetrics struct {
	recorded *prometheus.CounterVec
	moved    *prometheus.CounterVec
	failed   prometheus.Counter
	backlog  prometheus.Gauge
	held     prometheus.Gauge
}

// NewPrometheusMetrics registers the ledger's series with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_ledger_entries_total",
			Help: "Usage entries recorded, by where they were put: stream (Redis), postgres (Redis refused), memory (both refused; retried).",
		}, []string{"path"}),
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_ledger_moved_total",
			Help: "Usage entries moved from the Redis stream into Postgres, by outcome: inserted, duplicate (already there), dead (invalid; see sy:ledger:dead).",
		}, []string{"outcome"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_router_ledger_move_errors_total",
			Help: "Failed attempts to write a batch of usage entries to Postgres (each is retried).",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_router_ledger_backlog",
			Help: "Usage entries in the Redis stream not yet in Postgres (all replicas).",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_router_ledger_held",
			Help: "Usage entries held in this process's memory because Redis and Postgres both refused them; lost if the process dies.",
		}),
	}
	for _, c := range []prometheus.Collector{m.recorded, m.moved, m.failed, m.backlog, m.held} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Recorded implements Metrics.
func (m *PrometheusMetrics) Recorded(path string) { m.recorded.WithLabelValues(path).Inc() }

// Moved implements Metrics.
func (m *PrometheusMetrics) Moved(outcome string, n int) {
	m.moved.WithLabelValues(outcome).Add(float64(n))
}

// MoveFailed implements Metrics.
func (m *PrometheusMetrics) MoveFailed() { m.failed.Inc() }

// Backlog implements Metrics.
func (m *PrometheusMetrics) Backlog(n int64) { m.backlog.Set(float64(n)) }

// Held implements Metrics.
func (m *PrometheusMetrics) Held(n int) { m.held.Set(float64(n)) }
