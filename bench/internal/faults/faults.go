// Package faults is the fault suite: against a whole platform of its own
// (StartPlatform, on the process harness) it drives a mixed load of demo_llm and demo_react dispatches,
// each with an idempotency key and a unique prompt, injects one fault at a time, lets the
// platform recover, and counts what the platform promises never to do: lose an accepted run,
// pay a provider twice for the same call, run a side-effecting tool twice, or bill a provider
// call without a usage-ledger row. docs/faults.md describes the suite and its figures.
package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// Fault is one kind of failure. Inject does it at the fault's moment and returns how to
// recover, which the suite calls once the outage has lasted (outage is passed for faults
// that must say how long they last, as a provider's Retry-After does).
type Fault struct {
	Name string
	// What says what is done, for the report.
	What   string
	Inject func(ctx context.Context, p *Platform, outage time.Duration) (restore func(context.Context) error, err error)
}

// kill is a service's SIGKILL; recovery starts it again.
func kill(name string) Fault {
	return Fault{Name: strings.TrimPrefix(name, "provider-") + "-kill", What: name + " SIGKILL, restarted after the outage",
		Inject: func(_ context.Context, p *Platform, _ time.Duration) (func(context.Context) error, error) {
			return func(ctx context.Context) error { return p.Restart(ctx, name) }, p.Kill(name)
		}}
}

// freezeKill stops a service (SIGSTOP) for d, then SIGKILLs it: what it was sent meanwhile
// reached its sockets and was never read.
func freezeKill(ctx context.Context, p *Platform, name string, d time.Duration) error {
	proc := p.Proc(name)
	if proc == nil || proc.Exited() {
		return fmt.Errorf("%s is not running", name)
	}
	if err := syscall.Kill(proc.PID(), syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	if err := sleepCtx(ctx, d); err != nil {
		_ = p.Kill(name)
		return err
	}
	return p.Kill(name)
}

// burst makes sim-llm answer every request with status for the outage.
func burst(name string, status int) Fault {
	return Fault{Name: name, What: fmt.Sprintf("sim-llm answers every request %d for the outage", status),
		Inject: func(ctx context.Context, p *Platform, outage time.Duration) (func(context.Context) error, error) {
			// The burst lasts the outage, so that a 429's Retry-After tells the truth; the
			// recovery ends it for certain.
			err := simControl(ctx, p, http.MethodPost, map[string]any{"status": status, "duration": outage.String()})
			return func(ctx context.Context) error { return simControl(ctx, p, http.MethodDelete, nil) }, err
		}}
}

// All is every fault of the suite, in the order the full suite runs them. "none" is the
// control: a phase without a fault must report nothing.
func All() []Fault {
	return []Fault{
		{Name: "none", What: "no fault (the control)", Inject: func(context.Context, *Platform, time.Duration) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, nil
		}},
		kill(harness.Executor),
		kill(harness.Dispatcher),
		kill(harness.Router),
		// Two words before the tag: sim-llm seeds a ticket's title with a prompt's first four
		// words, which must include the tag's two parts to stay unique.
		{Name: "router-freeze", What: "provider-router SIGSTOP for 500 ms (answers reach it that it never reads, as " +
			"under CPU starvation), then SIGKILL, restarted after the outage",
			Inject: func(ctx context.Context, p *Platform, _ time.Duration) (func(context.Context) error, error) {
				return func(ctx context.Context) error { return p.Restart(ctx, harness.Router) },
					freezeKill(ctx, p, harness.Router, 500*time.Millisecond)
			}},
		{Name: "redis-kill", What: "Redis kill -9 (append-only file, fsync every second), restarted after the outage",
			Inject: func(ctx context.Context, p *Platform, _ time.Duration) (func(context.Context) error, error) {
				return p.Stores.Start, p.Stores.Crash(ctx, "redis")
			}},
		{Name: "redis-flush", What: "executor stopped (SIGTERM) while the backlog queues, Redis FLUSHALL at the end of the outage, " +
			"executor restarted: the reconciler must re-enqueue the queued runs",
			Inject: func(ctx context.Context, p *Platform, _ time.Duration) (func(context.Context) error, error) {
				restore := func(ctx context.Context) error {
					if err := p.Redis.FlushAll(ctx).Err(); err != nil {
						return fmt.Errorf("FLUSHALL: %w", err)
					}
					return p.Restart(ctx, harness.Executor)
				}
				return restore, p.Stop(harness.Executor, 35*time.Second)
			}},
		{Name: "pg-stop", What: "Postgres pg_ctl stop -m immediate, restarted after the outage",
			Inject: func(ctx context.Context, p *Platform, _ time.Duration) (func(context.Context) error, error) {
				return p.Stores.Start, p.Stores.Crash(ctx, "postgres")
			}},
		burst("llm-5xx", http.StatusInternalServerError),
		burst("llm-429", http.StatusTooManyRequests),
	}
}

// Select returns the faults named in a comma-separated list ("all" or "" for every one).
func Select(names string) ([]Fault, error) {
	all := All()
	if names == "" || names == "all" {
		return all, nil
	}
	var out []Fault
	for n := range strings.SplitSeq(names, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, f := range all {
			if f.Name == n {
				out, found = append(out, f), true
			}
		}
		if !found {
			var known []string
			for _, f := range all {
				known = append(known, f.Name)
			}
			return nil, fmt.Errorf("unknown fault %q (want %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// Config shapes each phase: load at Rate for Load, the fault At after the start of the
// load, recovery Outage later, then up to Window after the load for every run to end.
type Config struct {
	// Rate is dispatches per second; default 10.
	Rate float64
	// Load is how long dispatches are started; default 60 s, long enough to see the
	// router's circuit breaker (open 30 s) close again after a provider outage.
	Load time.Duration
	// At is when the fault is injected, from the start of the load; default Load/3.
	At time.Duration
	// Outage is how long the fault lasts before recovery; default 5 s.
	Outage time.Duration
	// Window bounds the wait, after the load, for every accepted run to end; a run still
	// not ended is lost. Default 2 min.
	Window time.Duration
	// ReactShare is the share of demo_react among the dispatches; default 0.5.
	ReactShare float64
	// ChainShare is the share of chains among the dispatches, half demo_research (five
	// steps, one skipped by its condition), half the content-pipeline workflow (four
	// jobs, two in parallel); negative: none. Default 0.1.
	ChainShare float64
	// DispatchTimeout bounds how long one dispatch is retried before it counts as not
	// accepted; default 60 s.
	DispatchTimeout time.Duration
	// LedgerWait bounds the wait, once every run has ended, for the usage ledger (written
	// off the request path) to hold a row per call served; rows still missing then are
	// counted missing. Default 10 s.
	LedgerWait time.Duration
	// Log receives progress lines; nil discards.
	Log func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Rate == 0 {
		c.Rate = 10
	}
	if c.ChainShare == 0 {
		c.ChainShare = 0.1
	}
	if c.Load == 0 {
		c.Load = time.Minute
	}
	if c.At == 0 {
		c.At = c.Load / 3
	}
	if c.Outage == 0 {
		c.Outage = 5 * time.Second
	}
	if c.Window == 0 {
		c.Window = 2 * time.Minute
	}
	if c.ReactShare == 0 {
		c.ReactShare = 0.5
	}
	if c.DispatchTimeout == 0 {
		c.DispatchTimeout = time.Minute
	}
	if c.LedgerWait == 0 {
		c.LedgerWait = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	return c
}

// SimArgs are the sim-llm flags the suite needs: answers with some latency (so that calls
// are in flight when a process dies) and repeat tracking.
var SimArgs = []string{"--track-repeats", "--log-level", "warn",
	"--model", "sim-fast=latency=uniform:100ms-600ms,output=uniform:10-60",
	"--model", "sim-large=latency=uniform:200ms-1s,output=uniform:50-200"}

// ToolArgs make the demo tool answer after a while, so that tool calls are in flight when
// a process dies.
var ToolArgs = []string{"--delay", "200ms"}

// Prepare readies a started platform for the suite: no dispatch rate limit on the
// development organisation (the load is the suite's, not a tenant's).
func Prepare(ctx context.Context, p *Platform) error {
	return p.Admin(ctx, http.MethodPatch, "/api/v1/admin/org", map[string]any{"orgRpm": 0, "userRpm": 0}, nil)
}

// Run runs each fault in turn on p and returns one report per fault. It stops early only
// when the platform cannot be brought back (a phase's error).
func Run(ctx context.Context, p *Platform, faults []Fault, cfg Config) ([]Report, error) {
	cfg = cfg.withDefaults()
	var out []Report
	for _, f := range faults {
		r, err := runPhase(ctx, p, f, cfg)
		if err != nil {
			return out, fmt.Errorf("fault %s: %w", f.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
