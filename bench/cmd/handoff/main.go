// Command handoff measures a chain's hand-off — step N's end → step N+1's handler start —
// on Switchyard and, beside it in the same run, on Temporal's dev server (issue 19,
// docs/PERFORMANCE.md "Chain hand-off"). Both systems run chains of three sequential no-op
// steps at each concurrency level (-levels), the systems interleaved round by round:
//
//	temporal    bench/temporal/cmd/temporalhandoff (a module of its own, so that the Temporal
//	            SDK stays out of the platform's build) against `temporal server start-dev`,
//	            which this command starts (-temporal-server) on free loopback ports. A
//	            hand-off is activity N's end → activity N+1's start, both read with time.Now
//	            inside the activities on the one worker.
//	switchyard  every service of `make run` through the process harness on a fresh database
//	            and Redis database of the test servers (eval "$(scripts/stack.sh env test)"),
//	            sim-llm at zero latency; a chain skill of three llm_only steps dispatched
//	            through POST /api/v1/dispatch. A hand-off is the next step's runs.started_at
//	            (its claim by the executor) − the previous step's runs.finished_at.
//	switchyard-wf-jobs, switchyard-wf-steps
//	            the same platform (one for all three switchyard systems) running workflows
//	            (issue 21) of the same three demo_llm calls: three one-step jobs one after
//	            another (a hand-off between jobs), or one job of three steps (between steps
//	            of a job). Measured as the chain is: a workflow compiles to one.
//
// It prints one JSON line per system, level and round, then one per system and level over
// all rounds (round 0), on stdout, and a human summary on stderr. bench/cmd/handoff/run.sh
// builds everything and runs it; see there for the reproduction command.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/stats"
)

func main() {
	levels := flag.String("levels", "1x200,200x1000", "concurrency levels, comma-separated: <chains in flight>x<chains measured>")
	rounds := flag.Int("rounds", 2, "rounds; each runs every level on every system, the systems' order alternating")
	warmup := flag.Int("warmup", 20, "chains run first in each phase and not counted")
	systems := flag.String("systems", "temporal,temporal-tuned,switchyard", "systems to measure, comma-separated: "+
		"temporal (the dev server as it starts), temporal-tuned (its documented latency knobs, see tunedFlags), switchyard "+
		"(a chain skill), switchyard-wf-jobs (a workflow of three one-step jobs), switchyard-wf-steps (a workflow of one "+
		"three-step job); the switchyard systems share one platform")
	temporalServer := flag.String("temporal-server", "", "the Temporal CLI binary (`temporal server start-dev` is started with it)")
	temporalBench := flag.String("temporal-bench", "", "the temporalhandoff binary (bench/temporal)")
	temporalFlags := flag.String("temporal-flags", "", "extra `temporal server start-dev` flags for both Temporal systems, space-separated "+
		"(e.g. --dynamic-config-value matching.numTaskqueueReadPartitions=1)")
	bin := flag.String("bin", "", "switchyard: directory with the platform's binaries (default: build them)")
	slots := flag.Int("queue-concurrency", 1000, "switchyard: the default queue's concurrency (a Temporal worker's default: 1,000 activity slots)")
	flag.Parse()
	if err := run(*levels, *rounds, *warmup, strings.Split(*systems, ","), *temporalServer, *temporalBench,
		strings.Fields(*temporalFlags), *bin, *slots); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

// level is one concurrency level: chains in flight at once, chains measured.
type level struct{ inflight, chains int }

func parseLevels(s string) ([]level, error) {
	var out []level
	for part := range strings.SplitSeq(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(part), "x")
		k, err1 := strconv.Atoi(a)
		n, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || k < 1 || n < 1 {
			return nil, fmt.Errorf("-levels: %q is not <in flight>x<chains>", part)
		}
		out = append(out, level{k, n})
	}
	return out, nil
}

// system runs chains of three no-op steps and reports each chain's hand-offs.
type system interface {
	Name() string
	// Phase runs warmup chains, then n chains with inflight at once, and returns the
	// measured chains' hand-offs and the CPU its processes used.
	Phase(ctx context.Context, inflight, n, warmup int, label string) (sample, error)
	Close()
}

// sample is what one phase of a system measured.
type sample struct {
	// handoffs are two per chain.
	handoffs []time.Duration
	// parts split each hand-off where the system records more than its two ends (by name,
	// one per hand-off); nil where it does not.
	parts map[string][]time.Duration
	// cpu is the time the system's own processes ran during the phase.
	cpu time.Duration
}

// Result is one JSON line: a system's hand-offs at one level in one round (Round 0: all
// rounds together).
type Result struct {
	System   string  `json:"system"`
	Round    int     `json:"round"`
	InFlight int     `json:"inflight"`
	Chains   int     `json:"chains"`
	Handoffs int     `json:"handoffs"`
	P50MS    float64 `json:"p50_ms"`
	P90MS    float64 `json:"p90_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	MeanMS   float64 `json:"mean_ms"`
	// ElapsedS is the whole phase, warm-up included; ChainsPerS its chains (warm-up too) per second.
	ElapsedS   float64 `json:"elapsed_s,omitempty"`
	ChainsPerS float64 `json:"chains_per_s,omitempty"`
	// CPUMSPerChain is the CPU time of the system's own processes (for Temporal the server
	// and the bench's worker; for Switchyard the platform's services, not Postgres or
	// Redis) per chain, warm-up included.
	CPUMSPerChain float64 `json:"cpu_ms_per_chain,omitempty"`
	// HostBusy and HostSteal are the whole machine's shares during the phase; Load1 the
	// load average at its start: the host is shared.
	HostBusy  float64 `json:"host_busy,omitempty"`
	HostSteal float64 `json:"host_steal,omitempty"`
	Load1     float64 `json:"load1,omitempty"`
	// Parts are the hand-off's parts where the system records them (Switchyard: "coordinator",
	// the previous step's end → the next step's run created; "pickup", created → claimed).
	Parts map[string]Part `json:"parts,omitempty"`
}

// Part is the percentiles of one part of the hand-offs.
type Part struct {
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

func run(levelSpec string, rounds, warmup int, names []string, temporalServer, temporalBench string,
	temporalFlags []string, bin string, slots int) error {
	lv, err := parseLevels(levelSpec)
	if err != nil {
		return err
	}
	// SIGINT and SIGTERM end the run through the deferred Close calls, which stop the
	// Temporal dev servers and the platform instead of leaving them behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var sys []system
	var plat *platform // the switchyard systems' one platform
	defer func() {
		for _, s := range sys {
			s.Close()
		}
	}()
	for _, name := range names {
		var s system
		switch strings.TrimSpace(name) {
		case "temporal":
			s, err = startTemporal(ctx, "temporal", temporalServer, temporalBench, temporalFlags)
		case "temporal-tuned":
			s, err = startTemporal(ctx, "temporal-tuned", temporalServer, temporalBench, append(slices.Clone(tunedFlags), temporalFlags...))
		case "switchyard", "switchyard-wf-jobs", "switchyard-wf-steps":
			if plat == nil {
				if plat, err = startSwitchyard(ctx, bin, slots); err != nil {
					return err
				}
			}
			s = plat.system(strings.TrimSpace(name))
		default:
			err = fmt.Errorf("-systems: unknown system %q (temporal, temporal-tuned, switchyard, switchyard-wf-jobs, switchyard-wf-steps)", name)
		}
		if err != nil {
			return err
		}
		sys = append(sys, s)
	}
	enc := json.NewEncoder(os.Stdout)
	type key struct {
		system string
		level  level
	}
	all := map[key][]time.Duration{}
	var order []key
	for r := 1; r <= rounds; r++ {
		for _, l := range lv {
			round := slices.Clone(sys)
			if r%2 == 0 {
				slices.Reverse(round)
			}
			for _, s := range round {
				res, smp, err := phase(ctx, s, l, warmup, r)
				if err != nil {
					return fmt.Errorf("%s, %d in flight, round %d: %w", s.Name(), l.inflight, r, err)
				}
				if err := enc.Encode(res); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "round %d  %-19s %3d in flight  %4d chains  hand-off %s  %.0f chains/s  cpu %.2f ms/chain  host busy %.0f%% steal %.0f%% load %.1f\n",
					r, s.Name(), l.inflight, l.chains, stats.Summarize(smp.handoffs), res.ChainsPerS, res.CPUMSPerChain,
					100*res.HostBusy, 100*res.HostSteal, res.Load1)
				for _, name := range slices.Sorted(maps.Keys(smp.parts)) {
					fmt.Fprintf(os.Stderr, "         %-19s part %-11s %s\n", "", name, stats.Summarize(smp.parts[name]))
				}
				k := key{s.Name(), l}
				if _, ok := all[k]; !ok {
					order = append(order, k)
				}
				all[k] = append(all[k], smp.handoffs...)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "\nall rounds          in flight  hand-offs     p50       p90       p99       max")
	for _, k := range order {
		res := summarize(k.system, 0, k.level, all[k])
		if err := enc.Encode(res); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%-19s %9d  %9d  %7.2fms %7.2fms %7.2fms %7.2fms\n",
			k.system, k.level.inflight, res.Handoffs, res.P50MS, res.P90MS, res.P99MS, res.MaxMS)
	}
	return nil
}

// phase runs one system at one level and measures the host around it.
func phase(ctx context.Context, s system, l level, warmup, round int) (Result, sample, error) {
	load1 := loadAverage()
	before, err := hostcpu.Read()
	if err != nil {
		return Result{}, sample{}, err
	}
	start := time.Now()
	smp, err := s.Phase(ctx, l.inflight, l.chains, warmup, fmt.Sprintf("round %d", round))
	if err != nil {
		return Result{}, sample{}, err
	}
	elapsed := time.Since(start)
	after, err := hostcpu.Read()
	if err != nil {
		return Result{}, sample{}, err
	}
	use := after.Since(before)
	res := summarize(s.Name(), round, l, smp.handoffs)
	for name, d := range smp.parts {
		st := stats.Summarize(d)
		if res.Parts == nil {
			res.Parts = map[string]Part{}
		}
		res.Parts[name] = Part{P50MS: float64(st.P50.Microseconds()) / 1000, P99MS: float64(st.P99.Microseconds()) / 1000}
	}
	res.ElapsedS = elapsed.Seconds()
	res.ChainsPerS = float64(l.chains+warmup) / elapsed.Seconds()
	res.CPUMSPerChain = float64(smp.cpu.Microseconds()) / 1000 / float64(l.chains+warmup)
	res.HostBusy, res.HostSteal, res.Load1 = use.Busy, use.Steal, load1
	return res, smp, nil
}

func summarize(name string, round int, l level, handoffs []time.Duration) Result {
	st := stats.Summarize(handoffs)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Result{System: name, Round: round, InFlight: l.inflight, Chains: len(handoffs) / 2, Handoffs: st.N,
		P50MS: ms(st.P50), P90MS: ms(st.P90), P99MS: ms(st.P99), MaxMS: ms(st.Max), MeanMS: ms(st.Mean)}
}

// loadAverage is the one-minute load average, 0 when it cannot be read.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
