// Command faults is the fault suite (`make faults`, docs/faults.md): it starts a whole
// platform of its own (its own Postgres and Redis, scripts/stack.sh profile faults), drives
// a mixed load of demo_llm and demo_react dispatches with idempotency keys, injects each
// fault in turn with its recovery, and prints per fault: accepted, completed, failed, lost,
// provider calls paid twice, tool side effects done twice, usage-ledger rows missing or
// extra, and the recovery times. It exits 1 when anything was lost or done twice.
//
// Each fault gets a fresh platform (in -dir/<fault>/, logs included), so that what a fault
// leaves behind is not counted against the next one; -one-platform runs them all, in
// order, on one platform.
//
//	go run ./bench/cmd/faults [-faults all|none,executor-kill,...] [-rate 10] [-load 60s]
//	    [-outage 5s] [-window 2m] [-dir .run/faults] [-bin DIR] [-one-platform]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/faults"
	"github.com/switchyard-ai/switchyard/harness"
)

func main() {
	var names []string
	for _, f := range faults.All() {
		names = append(names, f.Name)
	}
	list := flag.String("faults", "all", "faults to inject, comma-separated: all, or "+strings.Join(names, ", "))
	var cfg faults.Config
	flag.Float64Var(&cfg.Rate, "rate", 10, "dispatches per second")
	flag.DurationVar(&cfg.Load, "load", time.Minute, "how long each fault's load runs")
	flag.DurationVar(&cfg.At, "at", 0, "when the fault is injected, from the start of the load (default load/3)")
	flag.DurationVar(&cfg.Outage, "outage", 5*time.Second, "how long each fault lasts before recovery")
	flag.DurationVar(&cfg.Window, "window", 2*time.Minute, "how long after the load every accepted run may take to end")
	flag.Float64Var(&cfg.ReactShare, "react-share", 0.5, "share of demo_react among the dispatches")
	flag.Float64Var(&cfg.ChainShare, "chain-share", 0.1, "share of chains among the dispatches, half demo_research, half the content-pipeline workflow (negative: none)")
	dir := flag.String("dir", ".run/faults", "directory of the suite's stores, logs and keys (emptied first)")
	bin := flag.String("bin", "", "directory holding the binaries (default: build them into -dir/bin)")
	one := flag.Bool("one-platform", false, "run every fault on one platform, one after the other (faults add up)")
	flag.Parse()
	if err := run(*list, *dir, *bin, *one, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

func run(list, dir, bin string, one bool, cfg faults.Config) error {
	selected, err := faults.Select(list)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	cfg.Log = logf
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		logf("building the binaries into %s", bin)
		if err := harness.Build(ctx, bin, harness.Platform...); err != nil {
			return err
		}
	}
	var reports []faults.Report
	if one {
		reports, err = runOn(ctx, dir, bin, selected, cfg)
	} else {
		for _, f := range selected {
			var r []faults.Report
			r, err = runOn(ctx, filepath.Join(dir, f.Name), bin, []faults.Fault{f}, cfg)
			reports = append(reports, r...)
			if err != nil {
				break
			}
		}
	}
	fmt.Printf("\nfault suite: %.0f dispatches/s for %s per fault (%.0f%% demo_react, %.0f%% chains: demo_research and the content-pipeline workflow), fault at %s, outage %s, window %s\n\n",
		cfg.Rate, cfg.Load, cfg.ReactShare*100, max(cfg.ChainShare, 0)*100, cfgAt(cfg), cfg.Outage, cfg.Window)
	faults.Print(os.Stdout, reports)
	if err != nil {
		return err
	}
	var bad []string
	for _, r := range reports {
		if !r.OK() {
			bad = append(bad, r.Fault)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("lost, duplicated or unbilled work under: %s", strings.Join(bad, ", "))
	}
	var cut int64
	for _, r := range reports {
		cut += r.DupCutOff
	}
	if cut > 0 {
		fmt.Printf("\nnothing lost, nothing done twice, every call in the ledger; %d calls paid twice, each answered by "+
			"the provider to a router that died before reading it, and recorded (cut-off)\n", cut)
		return nil
	}
	fmt.Println("\nnothing lost, nothing paid or done twice, every call in the ledger")
	return nil
}

// runOn starts a platform in dir, runs the faults on it and stops it.
func runOn(ctx context.Context, dir, bin string, list []faults.Fault, cfg faults.Config) ([]faults.Report, error) {
	p, err := faults.StartPlatform(ctx, faults.PlatformOptions{Dir: dir, Bin: bin, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if err := faults.Prepare(ctx, p); err != nil {
		return nil, err
	}
	cfg.Log("platform up; logs in %s", filepath.Join(dir, "logs"))
	return faults.Run(ctx, p, list, cfg)
}

func cfgAt(c faults.Config) time.Duration {
	if c.At == 0 {
		return c.Load / 3
	}
	return c.At
}
