// Command temporalhandoff is the Temporal side of the chain hand-off benchmark (issue 19,
// docs/PERFORMANCE.md "Chain hand-off"): against a running Temporal server (the CLI's
// `temporal server start-dev`) it runs workflows of three sequential no-op activities on a
// worker in this process, and prints one JSON line per workflow with its two hand-offs —
// activity N's end → activity N+1's start, both read with time.Now inside the activities on
// this one worker, so one clock takes both ends.
//
// The worker, the client and the server run with their defaults (worker.Options{}: two
// pollers per task type, 1,000 execution slots each, sticky workflow cache on). The
// activities are ordinary activities on the workflow's task queue, as a Switchyard chain's
// steps are ordinary dispatches; whether the server hands them out eagerly is the server's
// `system.enableActivityEagerExecution` (off unless the server is started with it).
//
// bench/cmd/handoff runs this tool beside the Switchyard side and summarises both; it lives
// in a module of its own (bench/temporal) so that the Temporal SDK's dependencies stay out
// of the platform's build. Build and run it with GOWORK=off:
//
//	cd bench/temporal && GOWORK=off go run ./cmd/temporalhandoff -addr 127.0.0.1:7233 -workflows 200 -inflight 1
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/sync/errgroup"
)

// steps is the chain's length: three activities, two hand-offs.
const steps = 3

func main() {
	addr := flag.String("addr", "127.0.0.1:7233", "Temporal frontend (host:port)")
	namespace := flag.String("namespace", "default", "Temporal namespace")
	n := flag.Int("workflows", 200, "workflows measured")
	inflight := flag.Int("inflight", 1, "workflows in flight at once (closed loop)")
	warmup := flag.Int("warmup", 20, "workflows run first, at the same concurrency, and not reported")
	label := flag.String("label", "", "free text copied into every JSON line (e.g. the round)")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on the whole run")
	flag.Parse()
	if err := run(*addr, *namespace, *n, *inflight, *warmup, *label, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "temporalhandoff:", err)
		os.Exit(1)
	}
}

// Chain is one workflow's outcome, one JSON line on stdout.
type Chain struct {
	System   string `json:"system"`
	Label    string `json:"label,omitempty"`
	InFlight int    `json:"inflight"`
	Chain    string `json:"chain"`
	// HandoffsUS are the hand-offs in microseconds: HandoffsUS[i] is activity i+1's start
	// minus activity i's end.
	HandoffsUS []int64 `json:"handoffs_us"`
	// MakespanUS is the client's start call → the client seeing the result.
	MakespanUS int64 `json:"makespan_us"`
}

func run(addr, namespace string, n, inflight, warmup int, label string, timeout time.Duration) error {
	if n < 1 || inflight < 1 || warmup < 0 {
		return errors.New("-workflows and -inflight must be at least 1, -warmup at least 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: logger})
	if err != nil {
		return fmt.Errorf("dialing Temporal at %s: %w", addr, err)
	}
	defer c.Close()

	// A task queue of this run's own, so no other run's worker takes its tasks.
	queue := "handoff-" + rand.Text()[:10]
	rec := &recorder{runs: map[string]*[steps][2]time.Time{}}
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(Chain3)
	w.RegisterActivity(rec.Step)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	defer w.Stop()

	if _, err := drive(ctx, c, queue, rec, inflight, warmup, "warmup"); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	start := time.Now()
	chains, err := drive(ctx, c, queue, rec, inflight, n, "m")
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	enc := json.NewEncoder(os.Stdout)
	for _, ch := range chains {
		ch.System, ch.Label, ch.InFlight = "temporal", label, inflight
		if err := enc.Encode(ch); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "temporalhandoff: %d workflows, %d in flight, %s, %.1f workflows/s\n",
		n, inflight, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	return nil
}

// drive runs n workflows, inflight at a time (each started when one before has ended), and
// returns each one's hand-offs.
func drive(ctx context.Context, c client.Client, queue string, rec *recorder, inflight, n int, prefix string) ([]Chain, error) {
	var mu sync.Mutex
	var out []Chain
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(inflight)
	for i := range n {
		g.Go(func() error {
			ch, err := runOne(ctx, c, queue, rec, fmt.Sprintf("%s-%s-%d", queue, prefix, i))
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, ch)
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

func runOne(ctx context.Context, c client.Client, queue string, rec *recorder, id string) (Chain, error) {
	t0 := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, Chain3)
	if err != nil {
		return Chain{}, fmt.Errorf("starting workflow %s: %w", id, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return Chain{}, fmt.Errorf("workflow %s: %w", id, err)
	}
	makespan := time.Since(t0)
	ts, ok := rec.take(id)
	if !ok {
		return Chain{}, fmt.Errorf("workflow %s completed but its activities recorded no times", id)
	}
	ch := Chain{Chain: id, MakespanUS: makespan.Microseconds()}
	for i := 1; i < steps; i++ {
		ch.HandoffsUS = append(ch.HandoffsUS, ts[i][0].Sub(ts[i-1][1]).Microseconds())
	}
	return ch, nil
}

// Chain3 is the workflow: three activities, each started when the one before has ended.
func Chain3(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for i := range steps {
		if err := workflow.ExecuteActivity(ctx, "Step", i).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// recorder keeps each workflow's activity start and end times.
type recorder struct {
	mu   sync.Mutex
	runs map[string]*[steps][2]time.Time // workflow id → [step]{start, end}
}

// Step is the no-op activity: it notes when it started and when it ended.
func (r *recorder) Step(ctx context.Context, step int) error {
	start := time.Now()
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	if step < 0 || step >= steps {
		return fmt.Errorf("step %d out of range", step)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.runs[id]
	if ts == nil {
		ts = new([steps][2]time.Time)
		r.runs[id] = ts
	}
	ts[step][0] = start
	ts[step][1] = time.Now()
	return nil
}

// take returns and forgets a workflow's times; ok is false unless every step recorded both.
func (r *recorder) take(id string) ([steps][2]time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.runs[id]
	delete(r.runs, id)
	if ts == nil {
		return [steps][2]time.Time{}, false
	}
	for _, s := range ts {
		if s[0].IsZero() || s[1].IsZero() {
			return *ts, false
		}
	}
	return *ts, true
}
