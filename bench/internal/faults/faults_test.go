package faults

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// TestShortSuite is the fault suite's short version, part of `make test`: a small load on a
// platform of its own (its own Postgres and Redis on free ports, in a temporary directory),
// with the faults whose paths the platform's guarantees rest on — a worker killed mid-run,
// Postgres gone mid-run, a provider failing for a while. `make faults` runs every fault with
// a larger load (docs/faults.md).
func TestShortSuite(t *testing.T) {
	dir, err := os.MkdirTemp("", "switchyard-faults-")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("platform log:\n%s\nservice logs are kept in %s/logs", log.String(), dir)
			return
		}
		os.RemoveAll(dir)
	})
	pgPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	redisPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "bin")
	if err := harness.Build(ctx, bin, harness.Platform...); err != nil {
		t.Fatal(err)
	}
	p, err := StartPlatform(ctx, PlatformOptions{Dir: dir, Bin: bin, PGPort: pgPort, RedisPort: redisPort, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := Prepare(ctx, p); err != nil {
		t.Fatal(err)
	}
	selected, err := Select("executor-kill,dispatcher-kill,pg-stop,llm-5xx")
	if err != nil {
		t.Fatal(err)
	}
	reports, err := Run(ctx, p, selected, Config{Rate: 5, Load: 6 * time.Second, At: 2 * time.Second, Outage: 2 * time.Second,
		Window: time.Minute, Log: func(format string, args ...any) { t.Logf(format, args...) }})
	var table bytes.Buffer
	Print(&table, reports)
	t.Logf("\n%s", table.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if !r.OK() {
			t.Errorf("%s: lost, duplicated or unbilled work (see the table)", r.Fault)
		}
		if r.Accepted == 0 {
			t.Errorf("%s: no dispatch was accepted", r.Fault)
		}
	}
}

// TestRecoveryTimes: recover is the first completion of a run accepted after the fault;
// drain waits for every run accepted before the recovery, and is never while one has not
// ended.
func TestRecoveryTimes(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fault, restore := at(10), at(15)
	jobs := []*job{
		{id: "early", accepted: at(1)},        // ended before the fault: no part of either
		{id: "inflight", accepted: at(9.5)},   // resumed after the fault
		{id: "outage", accepted: at(12)},      // accepted during the outage
		{id: "after", accepted: at(16)},       // the first work after the recovery
		{id: "failedAfter", accepted: at(11)}, // failed: not a completion
		{tag: "never accepted"},
	}
	runs := map[string]runState{
		"early":       {status: "completed", finished: at(2)},
		"inflight":    {status: "completed", finished: at(27)},
		"outage":      {status: "completed", finished: at(18)},
		"after":       {status: "completed", finished: at(16.5)},
		"failedAfter": {status: "failed", finished: at(11.5)},
	}
	rec, drain := recovery(jobs, runs, fault, restore)
	if rec != 6500*time.Millisecond || drain != 17*time.Second {
		t.Fatalf("recover %s, drain %s; want 6.5s and 17s", rec, drain)
	}
	runs["inflight"] = runState{status: "running"}
	if _, drain = recovery(jobs, runs, fault, restore); drain >= 0 {
		t.Fatalf("drain %s with a run still running; want never (-1)", drain)
	}
	delete(runs, "after")
	delete(runs, "outage")
	if rec, _ = recovery(jobs, runs, fault, restore); rec >= 0 {
		t.Fatalf("recover %s with no run accepted after the fault completed; want never (-1)", rec)
	}
}

// A repeated request is traced to its job by the tag in its prompt, wherever the skill
// put it.
func TestTagIn(t *testing.T) {
	t.Parallel()
	byTag := map[string]string{"router-kill-abc123-00196": "job-196"}
	for prompt, want := range map[string]string{
		"router-kill-abc123-00196 needs a ticket":          "router-kill-abc123-00196",
		"Analyse the market for router-kill-abc123-00196.": "router-kill-abc123-00196",
		"Analyse the market for router-kill-abc123-00197.": "",
	} {
		if got := tagIn(prompt, byTag); got != want {
			t.Errorf("tagIn(%q) = %q, want %q", prompt, got, want)
		}
	}
}
