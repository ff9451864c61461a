// Package sim is sim-llm: an OpenAI-compatible chat completions server that answers
// deterministically from the request and a seed, with configurable latency, output length,
// RPM/TPM limits and injected faults per model, and counts what it served and refused.
// It exists so that development, tests and benchmarks of Switchyard can exercise every
// path through the router and the executor without a real provider; it never pretends to
// be anything but a simulator (models are owned by "sim-llm", the system fingerprint says
// so). docs/sim-llm.md is the user's guide.
package sim

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// Server is one simulated provider. Its Handler is safe for any number of concurrent
// requests.
type Server struct {
	cfg     Config
	log     *slog.Logger
	models  map[string]*modelState
	names   []string // configured order, for /v1/models
	total   counters
	bad     atomic.Int64
	created int64 // Unix time reported as every model's creation date
	handler http.Handler
	// repeats is nil unless Config.TrackRepeats.
	repeats *repeats
	bursts  bursts
	scripts scripts
}

// modelState is a model with its limits and counters.
type modelState struct {
	model
	limits *limiter
	stats  counters
}

// New validates cfg and builds a Server. log receives request-level events; pass
// slog.New(slog.DiscardHandler) to silence it.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	cfg, models, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("sim-llm config: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		log:     log,
		models:  make(map[string]*modelState, len(models)),
		created: cfg.Now().Unix(),
		bursts:  bursts{now: cfg.Now},
	}
	if cfg.TrackRepeats {
		s.repeats = newRepeats()
	}
	// Scaling the limit window with the latencies keeps a compressed run faithful: a
	// workload that hits 60 RPM with 1 s latencies at scale 1 hits it the same way with
	// 1 ms latencies at scale 0.001.
	window := time.Duration(float64(time.Minute) * cfg.TimeScale)
	for _, m := range models {
		s.models[m.cfg.Name] = &modelState{model: m, limits: newLimiter(m.cfg.RPM, m.cfg.TPM, window, cfg.Now)}
		s.names = append(s.names, m.cfg.Name)
	}
	for _, m := range slices.Sorted(maps.Keys(cfg.Scripts)) {
		if err := s.SetScript(ModelScriptPrefix+m, cfg.Scripts[m]); err != nil {
			return nil, fmt.Errorf("sim-llm config: scripts[%s]: %w", m, err)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Handler serves the OpenAI endpoints (/v1/chat/completions, /v1/models), /healthz and
// the simulator's own /sim/stats and /sim/reset.
func (s *Server) Handler() http.Handler { return s.handler }

// Models returns the validated model configurations, defaults filled, in configured order.
func (s *Server) Models() []ModelConfig {
	out := make([]ModelConfig, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.models[n].cfg)
	}
	return out
}

// Stats returns a snapshot of the counters. Each counter is read atomically, the set is
// not: read it when the phase being measured is over.
func (s *Server) Stats() Stats {
	st := Stats{
		Models:      make(map[string]Counters, len(s.models)),
		Total:       s.total.snapshot(),
		BadRequests: s.bad.Load(),
		TimeScale:   s.cfg.TimeScale,
	}
	for name, m := range s.models {
		st.Models[name] = m.stats.snapshot()
	}
	if s.repeats != nil {
		rt := s.repeats.totals()
		st.Repeats = &rt
	}
	return st
}

// Repeats lists the requests served more than once (Config.TrackRepeats).
func (s *Server) Repeats() Repeats {
	if s.repeats == nil {
		return Repeats{Repeated: []Repeat{}}
	}
	return s.repeats.list()
}

// StartBurst starts a burst of injected failures, replacing any burst still active. b
// must be valid (POST /sim/faults checks it).
func (s *Server) StartBurst(b Burst) { s.bursts.start(b) }

// StopBurst ends the active burst, if any.
func (s *Server) StopBurst() { s.bursts.stop() }

// Reset zeroes the counters (the repeats and the count of burst answers included) and
// refills every rate limit, for benchmarks between phases. An active burst goes on.
// Requests still in flight stay counted in in_flight and will count as served when they
// finish, so reset when the server is idle for counters that add up.
func (s *Server) Reset() {
	for _, m := range s.models {
		m.stats.reset()
		m.limits.reset()
	}
	s.total.reset()
	s.bad.Store(0)
	if s.repeats != nil {
		s.repeats.reset()
	}
	s.bursts.resetCount()
}

// runtimeSource feeds a rand.Rand from the runtime's per-thread generator, which is safe
// for concurrent use and contention-free. Latency and fault draws use it: they are meant
// to vary between runs and must not touch the per-request generator that makes content
// deterministic.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }

// timingRand is shared by every request; rand.Rand holds no state beyond its source.
var timingRand = rand.New(runtimeSource{})
