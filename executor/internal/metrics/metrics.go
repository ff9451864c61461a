// Package metrics holds the executor's Prometheus series: runs by tier and final status
// with their durations, pickups and their queue wait, resumes, pauses, LLM and tool calls
// by outcome, and journal writes with their latency. Every method is safe on a nil
// *Metrics (metrics off), so tests and tools that build a runner need not create one.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the executor's series on a registry of their own.
type Metrics struct {
	reg *prometheus.Registry

	runs        *prometheus.CounterVec
	runDuration *prometheus.HistogramVec
	pickups     *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	claim       prometheus.Histogram
	resumes     *prometheus.CounterVec
	pauses      *prometheus.CounterVec
	parks       *prometheus.CounterVec
	llmCalls    *prometheus.CounterVec
	llmDuration *prometheus.HistogramVec
	toolCalls   *prometheus.CounterVec
	toolLatency *prometheus.HistogramVec
	journal     *prometheus.CounterVec
	journalTime *prometheus.HistogramVec
}

// Outcomes of a journal write.
const (
	JournalOK         = "ok"          // written at the first try
	JournalAfterRetry = "after_retry" // written after one or more failed tries
	JournalFailed     = "failed"      // given up: the attempt ran out of time
)

// Replayed is the outcome of an LLM or tool step answered from the run's journal.
const Replayed = "replayed"

// Outcomes of a tool call besides ok, error and replayed.
const (
	ToolFromLedger = "from_ledger" // a side-effecting call answered from the tool-call ledger
	ToolResent     = "resent"      // a call of unknown outcome sent again with its key
)

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New registers the executor's series (and the Go runtime's and the process's) on a new
// registry.
func New() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_runs_total",
			Help: "Runs this executor ended, by tier (execution type) and final status.",
		}, []string{"tier", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_executor_run_duration_seconds",
			Help:    "Time from a run's first pickup to its end, across attempts and pauses, by tier and final status.",
			Buckets: latencyBuckets,
		}, []string{"tier", "status"}),
		pickups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_pickups_total",
			Help: "Run tasks taken off a queue, by queue and result: claimed, or dropped (missing, finished, held, paused or cancelled).",
		}, []string{"queue", "result"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_executor_queue_wait_seconds",
			Help:    "Time a claimed run waited in its queue: from queued_at to the handler's start.",
			Buckets: latencyBuckets,
		}, []string{"queue"}),
		claim: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_executor_claim_duration_seconds",
			Help:    "Time of the claim of a run in Postgres (one round trip).",
			Buckets: latencyBuckets,
		}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_resumes_total",
			Help: "Attempts that resumed a run from its journal, by cause: worker_lost (the run was still running: its worker died), parked (it waited for provider capacity) or requeued (a retry, or the resumption after an approval).",
		}, []string{"cause"}),
		parks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_parks_total",
			Help: "Runs put back to queued to wait, holding no worker, by reason: provider_capacity, provider_unavailable, router_unreachable.",
		}, []string{"reason"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_pauses_total",
			Help: "Runs paused for approval (pending_review), by tier.",
		}, []string{"tier"}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_llm_calls_total",
			Help: "LLM steps, by outcome: ok, replayed (answered from the journal, no router call) or the router's error code.",
		}, []string{"outcome"}),
		llmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_executor_llm_call_duration_seconds",
			Help:    "Time of each router call, by result (ok or error).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_tool_calls_total",
			Help: "Tool steps, by tool and outcome: ok, error (the tool or its arguments failed; the LLM is told), replayed, from_ledger, resent.",
		}, []string{"tool", "outcome"}),
		toolLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_executor_tool_call_duration_seconds",
			Help:    "Time of each tool call that reached the tool, by tool.",
			Buckets: latencyBuckets,
		}, []string{"tool"}),
		journal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_executor_journal_writes_total",
			Help: "Journal writes of LLM answers, tool results and decisions, by kind and outcome: ok, after_retry, failed.",
		}, []string{"kind", "outcome"}),
		journalTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_executor_journal_write_duration_seconds",
			Help:    "Time until a journal write was durable (retries included), by kind.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.runDuration, m.pickups, m.queueWait, m.claim, m.resumes,
		m.pauses, m.parks, m.llmCalls, m.llmDuration, m.toolCalls, m.toolLatency, m.journal, m.journalTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the series for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer is the registry, for tests.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// RunEnded counts a run's end; started is its first pickup.
// A run that never started (cancelled in its queue) has no duration.
func (m *Metrics) RunEnded(tier, status string, started time.Time) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(tier, status).Inc()
	if !started.IsZero() {
		m.runDuration.WithLabelValues(tier, status).Observe(time.Since(started).Seconds())
	}
}

// Pickup counts a task taken off queue; claimed runs report their queue wait (zero when
// unknown) and the claim's duration.
func (m *Metrics) Pickup(queue string, claimed bool, queueWait, claim time.Duration) {
	if m == nil {
		return
	}
	m.claim.Observe(claim.Seconds())
	if !claimed {
		m.pickups.WithLabelValues(queue, "dropped").Inc()
		return
	}
	m.pickups.WithLabelValues(queue, "claimed").Inc()
	if queueWait > 0 {
		m.queueWait.WithLabelValues(queue).Observe(queueWait.Seconds())
	}
}

// Causes of a resumed attempt.
const (
	ResumeWorkerLost = "worker_lost" // the run was still running: its worker died
	ResumeParked     = "parked"      // the run waited, parked, for provider capacity
	ResumeRequeued   = "requeued"    // a retry, or the resumption after an approval
)

// Resumed counts an attempt that resumes a run, by cause.
func (m *Metrics) Resumed(cause string) {
	if m != nil {
		m.resumes.WithLabelValues(cause).Inc()
	}
}

// Paused counts a pause for approval.
func (m *Metrics) Paused(tier string) {
	if m != nil {
		m.pauses.WithLabelValues(tier).Inc()
	}
}

// Parked counts a run parked to wait, by reason.
func (m *Metrics) Parked(reason string) {
	if m != nil {
		m.parks.WithLabelValues(reason).Inc()
	}
}

// LLMReplayed counts an LLM step answered from the journal.
func (m *Metrics) LLMReplayed() {
	if m != nil {
		m.llmCalls.WithLabelValues(Replayed).Inc()
	}
}

// LLMCall counts a router call: outcome is "ok" or the error code.
func (m *Metrics) LLMCall(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.llmCalls.WithLabelValues(outcome).Inc()
	result := "ok"
	if outcome != "ok" {
		result = "error"
	}
	m.llmDuration.WithLabelValues(result).Observe(d.Seconds())
}

// ToolCall counts a tool step; d is the call's time when it reached the tool (0 otherwise).
func (m *Metrics) ToolCall(tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	if d > 0 {
		m.toolLatency.WithLabelValues(tool).Observe(d.Seconds())
	}
}

// JournalWrite counts a journal write of kind (llm_answer, tool_result, decision) and the
// time until it was durable or given up.
func (m *Metrics) JournalWrite(kind, outcome string, d time.Duration) {
	if m != nil {
		m.journal.WithLabelValues(kind, outcome).Inc()
		m.journalTime.WithLabelValues(kind).Observe(d.Seconds())
	}
}
