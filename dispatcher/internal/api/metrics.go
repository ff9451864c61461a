package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hibiken/asynq"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// metrics is the dispatcher's Prometheus registry. Each Server has its own, so tests can
// run several servers in one process.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_dispatcher_requests_total",
			Help: "HTTP requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_dispatcher_request_duration_seconds",
			Help:    "HTTP request latency by route template and method (WebSocket: until the upgrade).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
	}
	hub := s.live.hub
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_stream_clients", Help: "Connected WebSocket clients.",
		}, func() float64 { return float64(hub.Stats().Clients) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_stream_dropped_clients_total",
			Help: "WebSocket clients closed as slow consumers (close code 4008).",
		}, func() float64 { return float64(hub.Stats().Dropped) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_stream_redis_subscriptions",
			Help: "Redis Pub/Sub subscriptions held (one per organisation with connected clients).",
		}, func() float64 { return float64(hub.Stats().Feeds) }),
	)
	if s.Inspector != nil {
		m.reg.MustRegister(&queueCollector{db: s, inspector: s.Inspector})
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// middleware counts and times every request by its route template (never the raw path,
// whose ids would make a series per job).
func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		code := c.Response().Status
		if err == nil && !c.Response().Committed && websocket.IsWebSocketUpgrade(c.Request()) {
			code = http.StatusSwitchingProtocols // hijacked: echo never saw the 101
		}
		if err != nil {
			// The error handler has not written yet: take the status it will write.
			var he *echo.HTTPError
			var ae *apierr.Error
			switch {
			case errors.As(err, &ae):
				code = ae.Status
			case errors.As(err, &he):
				code = he.Code
			default:
				code = 500
			}
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		method := c.Request().Method
		m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
		m.latency.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		return err
	}
}

// queueCollector reports, on each scrape, the backlog of every registered queue per
// priority tier, read from asynq.
type queueCollector struct {
	db        *Server
	inspector *asynq.Inspector
}

var (
	queueDepthDesc = prometheus.NewDesc("switchyard_queue_depth",
		"Tasks in a named queue's priority tier, by state (pending, active, scheduled, retry).",
		[]string{"queue", "priority", "state"}, nil)
	queueAgeDesc = prometheus.NewDesc("switchyard_queue_oldest_pending_age_seconds",
		"Age of the oldest pending task of a named queue's priority tier (0 when none waits).",
		[]string{"queue", "priority"}, nil)

	coordinatorDepthDesc = prometheus.NewDesc("switchyard_coordinator_queue_depth",
		"Tasks in the chain coordinator's queues, by state: coordinator_starts holds the chains waiting to "+
			"start (docs/chains.md \"Admission\"), coordinator the step ends and deadlines.",
		[]string{"queue", "state"}, nil)
	coordinatorAgeDesc = prometheus.NewDesc("switchyard_coordinator_oldest_pending_age_seconds",
		"Age of the oldest pending task of a coordinator queue (0 when none waits).",
		[]string{"queue"}, nil)
)

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueAgeDesc
	ch <- coordinatorDepthDesc
	ch <- coordinatorAgeDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs, err := store.ListQueues(ctx, q.db.DB)
	if err != nil {
		q.db.Log.Warn("metrics_queue_list_failed", "error", err)
		return
	}
	// asynq knows only tiers that ever held a task; the others report an empty backlog.
	known, err := q.inspector.Queues()
	if err != nil {
		q.db.Log.Warn("metrics_queue_list_failed", "error", err)
		return
	}
	for _, name := range []string{queue.Coordinator, queue.CoordinatorStarts} {
		var info asynq.QueueInfo
		if slices.Contains(known, name) {
			i, err := q.inspector.GetQueueInfo(name)
			if err != nil {
				q.db.Log.Warn("metrics_queue_info_failed", "queue", name, "error", err)
				continue
			}
			info = *i
		}
		for state, v := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled, "retry": info.Retry} {
			ch <- prometheus.MustNewConstMetric(coordinatorDepthDesc, prometheus.GaugeValue, float64(v), name, state)
		}
		ch <- prometheus.MustNewConstMetric(coordinatorAgeDesc, prometheus.GaugeValue, info.Latency.Seconds(), name)
	}
	for _, x := range qs {
		name := x.Name
		for _, p := range []run.Priority{run.PriorityCritical, run.PriorityHigh, run.PriorityNormal, run.PriorityLow} {
			var pending, active, scheduled, retry float64
			var age float64
			if tier := queue.Tier(name, p); slices.Contains(known, tier) {
				info, err := q.inspector.GetQueueInfo(tier)
				if err != nil {
					q.db.Log.Warn("metrics_queue_info_failed", "queue", name, "priority", string(p), "error", err)
					continue
				}
				pending, active = float64(info.Pending), float64(info.Active)
				scheduled, retry = float64(info.Scheduled), float64(info.Retry)
				age = info.Latency.Seconds()
			}
			for state, v := range map[string]float64{"pending": pending, "active": active, "scheduled": scheduled, "retry": retry} {
				ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, v, name, string(p), state)
			}
			ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age, name, string(p))
		}
	}
}
