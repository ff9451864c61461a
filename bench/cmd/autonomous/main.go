// Command autonomous measures the autonomous tier (issue 20, "Measure"; docs/PERFORMANCE.md,
// "Autonomous agents") on a platform of its own: its own Postgres and Redis
// (scripts/stack.sh, -pg-port/-redis-port, data in -dir/stores) and sim-llm, demo-tool,
// provider-router (mutual TLS), executor and dispatcher started through the process harness
// as bench/cmd/faults starts them. It never touches `make run`'s or the test stack's servers.
//
// Every agent is scripted at sim-llm (docs/sim-llm.md, "Scripted answers": a script per
// phase, named in the skill's system prompt), so each run takes the same path. The phases:
//
//   - step: -step-runs agents of -steps steps each (odd steps call demo_weather, even ones are
//     llm_only), the LLM answering in ~1 ms. It reports the executor's CPU per agent step
//     (utime+stime of the executor process from /proc over the phase, divided by the steps
//     executed: planning, evaluation and the run's pick-up and end included, nothing
//     subtracted) and, from the spans, each step's wall-clock time outside its LLM and tool
//     calls (the chain_step span minus the llm_call and tool_call spans under it).
//   - lab: -lab-runs agents of -lab-steps llm_only steps kept in flight for -lab-for (a
//     closed loop: each run that ends is replaced), the LLM answering with -latency (the lab's
//     95 % 1–5 s, 5 % 20–40 s). It reports the executor's RSS and Go heap before, during
//     (sampled every second) and after, per run in flight, and the throughput against the
//     theoretical rate: min(runs, -concurrency) workers each finishing a run every
//     (2·steps+2) calls × the latency's mean (-latency-mean).
//   - paused: -paused agents whose first step wants create_ticket, behind an approval gate:
//     they pause pending_review. It reports the executor's goroutines, RSS and Go heap
//     before and after, and the queue wait of an llm_only run dispatched to the same queue
//     (-concurrency workers, fewer than the paused runs) while they wait, and the goroutines
//     and memory again -settle later, once the connections the pausing opened have idled out.
//
// The executor is restarted before each phase, so that each starts from an idle process.
//
//	go run ./bench/cmd/autonomous [-phases step,lab,paused] [-step-runs 20] [-steps 10]
//	    [-lab-runs 200] [-lab-steps 3] [-lab-for 3m] [-paused 1000] [-settle 130s] [-concurrency 250]
//	    [-dir .run/autonomous] [-bin DIR] [-pg-port 25441] [-redis-port 26391]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// queueName is the bench's named queue; its concurrency is -concurrency.
const queueName = "agents"

type options struct {
	phases            []string
	stepRuns, steps   int
	labRuns, labSteps int
	labFor, labWarm   time.Duration
	latency           string
	latencyMean       time.Duration
	paused            int
	settle            time.Duration
	concurrency       int
	dir, bin          string
	pgPort, redisPort int
}

func main() {
	var o options
	var phases string
	flag.StringVar(&phases, "phases", "step,lab,paused", "phases to run, comma-separated: step, lab, paused")
	flag.IntVar(&o.stepRuns, "step-runs", 20, "step: agents dispatched at once")
	flag.IntVar(&o.steps, "steps", 10, "step: steps per agent (odd ones call demo_weather, even ones are llm_only)")
	flag.IntVar(&o.labRuns, "lab-runs", 200, "lab: agents kept in flight")
	flag.IntVar(&o.labSteps, "lab-steps", 3, "lab: llm_only steps per agent")
	flag.DurationVar(&o.labFor, "lab-for", 3*time.Minute, "lab: how long runs that end are replaced")
	flag.DurationVar(&o.labWarm, "lab-warm", 45*time.Second, "lab: the start of -lab-for left out of the throughput and the memory samples")
	flag.StringVar(&o.latency, "latency", "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s", "lab: sim-llm latency of every call")
	flag.DurationVar(&o.latencyMean, "latency-mean", 4350*time.Millisecond, "lab: the mean of -latency, for the theoretical rate")
	flag.IntVar(&o.paused, "paused", 1000, "paused: agents paused for approval")
	flag.DurationVar(&o.settle, "settle", 130*time.Second, "paused: how long after the pause the last reading is taken (the executor's router connections idle out after 90 s, and Go collects garbage at least every 2 min); 0 skips it")
	flag.IntVar(&o.concurrency, "concurrency", 250, "the bench queue's concurrency (the executor's workers)")
	flag.StringVar(&o.dir, "dir", ".run/autonomous", "directory of the bench's stores, logs and binaries (stores and logs emptied first)")
	flag.StringVar(&o.bin, "bin", "", "directory holding the binaries (default: build them into -dir/bin)")
	flag.IntVar(&o.pgPort, "pg-port", 25441, "the bench's Postgres port")
	flag.IntVar(&o.redisPort, "redis-port", 26391, "the bench's Redis port")
	flag.Parse()
	o.phases = strings.Split(phases, ",")
	for _, p := range o.phases {
		if !slices.Contains([]string{"step", "lab", "paused"}, p) {
			fmt.Fprintf(os.Stderr, "autonomous: unknown phase %q\n", p)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "autonomous:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, "logs")); err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		logf("building the binaries into %s", bin)
		if err := harness.Build(ctx, bin, harness.Platform...); err != nil {
			return err
		}
	}
	st, err := harness.StartStores(ctx, filepath.Join(dir, "stores"), o.pgPort, o.redisPort)
	if err != nil {
		return err
	}
	defer st.Stop(context.WithoutCancel(ctx)) //nolint:errcheck
	h, err := harness.New(ctx, harness.Options{Dir: dir, Bin: bin, DatabaseURL: st.DBURL, RedisURL: st.RedisURL,
		RouterTLS: true, Bootstrap: true, LogLevel: "warn", StopGrace: 10 * time.Second, Log: os.Stderr,
		SimArgs: []string{"--log-level", "warn", "--model", "sim-fast=latency=" + o.latency + ",output=uniform:20-80"}})
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.StartAll(ctx, harness.Platform...); err != nil {
		return err
	}
	b := &bench{h: h, o: o}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	logf("platform up; logs in %s", filepath.Join(dir, "logs"))
	fmt.Printf("autonomous: queue %q with %d workers; %s\n", queueName, o.concurrency, machine())
	for _, p := range o.phases {
		if err := b.restartExecutor(ctx); err != nil {
			return err
		}
		switch p {
		case "step":
			err = b.stepPhase(ctx)
		case "lab":
			err = b.labPhase(ctx)
		case "paused":
			err = b.pausedPhase(ctx)
		}
		if err != nil {
			return fmt.Errorf("phase %s: %w", p, err)
		}
	}
	return nil
}

// bench is the running platform.
type bench struct {
	h *harness.Harness
	o options
}

// prepare lifts the organisation's dispatch limits (the load is the bench's), registers the
// bench queue, and installs each phase's script and skill.
func (b *bench) prepare(ctx context.Context) error {
	if err := b.h.Admin(ctx, http.MethodPatch, "/api/v1/admin/org", map[string]any{"orgRpm": 0, "userRpm": 0,
		"maxBacklog": 0}, nil); err != nil {
		return err
	}
	if err := b.h.Admin(ctx, http.MethodPut, "/api/v1/admin/queues/"+queueName, map[string]any{"class": "cpu",
		"concurrency": b.o.concurrency, "timeoutSeconds": 3600}, nil); err != nil {
		return err
	}
	for _, s := range b.scripts() {
		if err := harness.JSON(ctx, http.MethodPost, b.h.SimURL+"/sim/scripts", nil, s.script, nil); err != nil {
			return fmt.Errorf("installing script %s: %w", s.name, err)
		}
		if err := b.h.Admin(ctx, http.MethodPut, "/api/v1/skills/"+s.name, s.skill, nil); err != nil {
			return fmt.Errorf("registering skill %s: %w", s.name, err)
		}
	}
	return nil
}

// restartExecutor starts the executor afresh, so that a phase starts from an idle process.
func (b *bench) restartExecutor(ctx context.Context) error {
	if err := b.h.Stop(harness.Executor, 30*time.Second); err != nil {
		return err
	}
	if _, err := b.h.Start(ctx, harness.Executor); err != nil {
		return err
	}
	// Let the asynq servers, the pools and the first GC settle.
	return sleep(ctx, 3*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// machine describes the host and its load, which shared hosts make part of every figure.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 3 {
		f = f[:3]
	}
	return fmt.Sprintf("load average %s", strings.Join(f, " "))
}
