// Command routerbench measures the provider router against sim-llm, in one run so every
// figure has its baseline beside it:
//
//	overhead   added latency (p50/p99) of the router — mutual TLS, limits, estimates and
//	           ledger on — over calling sim-llm directly, at fixed open-loop rates (each
//	           router call paired with a direct call due at the same moment), and the
//	           highest closed-loop throughput of both; optionally Portkey's gateway in front
//	           of the same sim-llm (-portkey "node .../@portkey-ai/gateway/build/start-server.js").
//	replicas   two router replicas sharing one RPM limit that sim-llm enforces too, with
//	           traffic far above it: upstream 429s (want 0) and the share of the limit served.
//
// It needs the test Postgres and Redis (eval $(scripts/stack.sh env test)) and builds the
// binaries itself. Run from the repository root:
//
//	go run ./bench/cmd/routerbench -mode overhead -rates 250,500,1000 -duration 5s
//	go run ./bench/cmd/routerbench -mode overhead -rates 1000 -steps     # calls naming their step
//	go run ./bench/cmd/routerbench -mode replicas -rpm 3000 -duration 30s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/load"
	"github.com/switchyard-ai/switchyard/bench/internal/routerstack"
	"github.com/switchyard-ai/switchyard/bench/internal/stats"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

const body = `{"model":"bench","max_tokens":16,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the benchmark."}]}`

func main() {
	mode := flag.String("mode", "overhead", "overhead or replicas")
	rates := flag.String("rates", "250,500,1000", "overhead: open-loop rates (calls/s), comma-separated")
	duration := flag.Duration("duration", 5*time.Second, "length of each measurement")
	conc := flag.Int("concurrency", 64, "overhead: closed-loop workers for the throughput figure")
	portkey := flag.String("portkey", "", "overhead: command that starts Portkey's gateway (it gets --port=N --headless)")
	routerEnv := flag.String("router-env", "", "overhead: extra environment for the router only, space-separated (e.g. GOGC=400)")
	aa := flag.Bool("aa", false, "overhead: also pair direct calls with direct calls (an A/A run): the added latency "+
		"of two identical paths is what this host can resolve")
	rpm := flag.Int("rpm", 3000, "replicas: the provider's RPM limit (sim-llm); the routers get rpm-1")
	bin := flag.String("bin", "", "directory with provider-router and sim-llm (default: go build them)")
	steps := flag.Bool("steps", false, "overhead: every router call names a (job, step) pair of its own (X-Job-ID, X-Step-Key), "+
		"as the executor's calls do: the router claims the pair and stores the answer for repeated calls")
	flag.Parse()
	st, err := routerstack.Start(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "routerbench:", err)
		os.Exit(1)
	}
	defer st.Close()
	switch *mode {
	case "overhead":
		err = overhead(st, *rates, *duration, *conc, *portkey, *aa, *steps, strings.Fields(*routerEnv))
	case "replicas":
		err = replicas(st, *rpm, *duration)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "routerbench:", err)
		os.Exit(1)
	}
}

// target is one way to reach sim-llm.
type target struct {
	name   string
	url    string
	header http.Header
	client *http.Client
	// each, when set, adjusts every call's headers.
	each func(http.Header)
}

func (t target) call(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = t.header.Clone()
	if t.each != nil {
		t.each(req.Header)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", t.name, resp.StatusCode)
	}
	return nil
}

func overhead(st *routerstack.Stack, rates string, d time.Duration, conc int, portkeyCmd string, aa, steps bool, routerEnv []string) error {
	ctx := context.Background()
	simURL, err := st.StartSim("--model", "bench=latency=0,output=constant:16")
	if err != nil {
		return err
	}
	// Limits on, far above the load: every call runs the limiter's scripts but never waits.
	org, err := st.NewOrg(ctx, simURL+"/v1", "bench", 100_000_000, 1_000_000_000)
	if err != nil {
		return err
	}
	routerURL, err := st.StartRouter(routerEnv...)
	if err != nil {
		return err
	}
	plain := http.Header{}
	plain.Set("Content-Type", "application/json")
	plain.Set("Authorization", "Bearer bench")
	targets := []target{
		{"direct", simURL + "/v1/chat/completions", plain, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}, nil},
		{"router", routerURL + "/internal/ai/chat", st.Headers(org), st.Client(512), nil},
	}
	if steps {
		targets[1].each = func(h http.Header) {
			h.Set("X-Job-ID", routerstack.UUID())
			h.Set("X-Step-Key", "llm/1")
		}
	}
	if aa {
		// The same path as direct on its own connections: its "added" latency is the
		// difference two identical calls due at the same moment show on this host.
		targets = append(targets, target{"direct2", targets[0].url, plain,
			&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}, nil})
	}
	if portkeyCmd != "" {
		pk, stop, err := startPortkey(portkeyCmd, simURL)
		if err != nil {
			fmt.Printf("portkey: not measured: %v\n", err)
		} else {
			defer stop()
			targets = append(targets, pk)
		}
	}
	fmt.Printf("router overhead: sim-llm latency 0, 16 output tokens; router with mTLS, limits, estimates, ledger\n")
	// Warm up connections, the estimator and the prepared statements.
	for _, t := range targets {
		load.Run(ctx, 200, time.Second, 64, t.call)
	}
	for _, r := range strings.Split(rates, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil {
			return err
		}
		// Each gateway is paired with direct calls at the same due times, so a stall of
		// this shared host delays both sides of the difference alike.
		for _, t := range targets[1:] {
			cpu0, cpuErr := hostcpu.Read()
			proc0 := processCPU(st, t.name)
			base, res, added := load.Paired(ctx, rate, d, 1024, targets[0].call, t.call)
			for _, r := range []struct {
				name string
				res  load.Result
			}{{targets[0].name, base}, {t.name, res}} {
				fmt.Printf("rate=%6.0f/s %-7s achieved=%7.1f/s errors=%d %s\n", rate, r.name,
					r.res.Achieved, r.res.Errors, r.res.Latency)
			}
			fmt.Printf("rate=%6.0f/s %-7s added p50=%s p99=%s (difference of the percentiles)\n", rate, t.name,
				ms(res.Latency.P50-base.Latency.P50), ms(res.Latency.P99-base.Latency.P99))
			fmt.Printf("rate=%6.0f/s %-7s added per call, paired: p50=%s p90=%s p99=%s p99.9=%s\n", rate, t.name,
				ms(added.P50), ms(added.P90), ms(added.P99), ms(added.P999))
			if cpu1, err := hostcpu.Read(); cpuErr == nil && err == nil {
				u := cpu1.Since(cpu0)
				fmt.Printf("rate=%6.0f/s %-7s machine busy %.0f%% of its cores, steal %.1f%%\n", rate, t.name, u.Busy*100, u.Steal*100)
			}
			if proc0 >= 0 && res.Latency.N > 0 {
				fmt.Printf("rate=%6.0f/s %-7s CPU per call in the %s process: %s\n", rate, t.name, t.name,
					ms((processCPU(st, t.name)-proc0)/time.Duration(res.Latency.N)))
			}
		}
	}
	for _, t := range targets {
		if t.name == "direct2" {
			continue // the same as direct
		}
		n, errs, lat := closedLoop(t, conc, d)
		fmt.Printf("max throughput %-7s concurrency=%d: %7.1f calls/s errors=%d %s\n", t.name, conc,
			float64(n)/d.Seconds(), errs, lat)
	}
	return nil
}

// processCPU is the CPU time the router replica has used so far, or -1 for targets whose
// process the stack did not start (Portkey) or when /proc cannot be read.
func processCPU(st *routerstack.Stack, target string) time.Duration {
	pids := st.PIDs("provider-router")
	if target != "router" || len(pids) == 0 {
		return -1
	}
	d, err := hostcpu.Process(pids[0])
	if err != nil {
		return -1
	}
	return d
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Microseconds())/1000) }

func closedLoop(t target, conc int, d time.Duration) (int64, int64, stats.Summary) {
	var n, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) {
				s := time.Now()
				if err := t.call(context.Background()); err != nil {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(s))
				n.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return n.Load(), errs.Load(), stats.Summarize(lat)
}

// startPortkey runs Portkey's open-source gateway in front of the same sim-llm, as an
// OpenAI provider with a custom host.
func startPortkey(command, simURL string) (target, func(), error) {
	addr := routerstack.FreeAddr()
	port := addr[strings.LastIndex(addr, ":")+1:]
	args := strings.Fields(command)
	cmd := exec.Command(args[0], append(args[1:], "--port="+port, "--headless")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return target{}, nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer bench")
	h.Set("x-portkey-provider", "openai")
	h.Set("x-portkey-custom-host", simURL+"/v1")
	t := target{"portkey", "http://" + addr + "/v1/chat/completions", h, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}, nil}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if t.call(context.Background()) == nil {
			return t, stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return target{}, nil, fmt.Errorf("gateway did not answer: %s", out.String())
}

func replicas(st *routerstack.Stack, rpm int, d time.Duration) error {
	ctx := context.Background()
	simURL, err := st.StartSim("--model", fmt.Sprintf("bench=latency=constant:20ms,output=constant:16,rpm=%d", rpm))
	if err != nil {
		return err
	}
	org, err := st.NewOrg(ctx, simURL+"/v1", "bench", rpm-1, 0)
	if err != nil {
		return err
	}
	var urls []string
	for range 2 {
		u, err := st.StartRouter()
		if err != nil {
			return err
		}
		urls = append(urls, u)
	}
	client := st.Client(256)
	rate := float64(rpm) / 60
	fmt.Printf("two replicas, provider limit %d RPM (%.1f/s, burst %d), router limit %d RPM, offered load 3x the rate for %s\n",
		rpm, rate, rpm, rpm-1, d)
	var ok, deadline, other atomic.Int64
	var i atomic.Int64
	start := time.Now()
	res := load.Run(ctx, 3*rate+float64(rpm)/d.Seconds(), d, 4096, func(ctx context.Context) error {
		url := urls[i.Add(1)%2]
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/internal/ai/chat", strings.NewReader(body))
		req.Header = st.Headers(org)
		req.Header.Set("X-Job-ID", routerstack.UUID())
		req.Header.Set("X-Deadline", time.Now().Add(2*time.Second).UTC().Format(time.RFC3339Nano))
		resp, err := client.Do(req)
		if err != nil {
			other.Add(1)
			return err
		}
		defer resp.Body.Close()
		var e struct{ Code string }
		raw, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == http.StatusOK:
			ok.Add(1)
			return nil
		case json.Unmarshal(raw, &e) == nil && e.Code == apierr.CodeRateLimitDeadline:
			deadline.Add(1)
		default:
			other.Add(1)
		}
		return errors.New(resp.Status)
	})
	elapsed := time.Since(start)
	sim, err := routerstack.SimStats(simURL)
	if err != nil {
		return err
	}
	// What the provider's bucket allowed while load was offered: its burst plus the refill
	// over the window. (After it, only calls already queued run, until their deadlines.)
	allowed := float64(rpm) + rate*d.Seconds()
	fmt.Printf("offered=%d served=%d refused_by_router(RATE_LIMIT_DEADLINE)=%d other_errors=%d elapsed=%s\n",
		ok.Load()+deadline.Load()+other.Load(), ok.Load(), deadline.Load(), other.Load(), elapsed.Round(time.Millisecond))
	fmt.Printf("sim-llm: served=%d upstream_429=%d; allowed by the limit=%.0f; served/allowed=%.2f%%\n",
		sim.Served, sim.Refused429, allowed, 100*float64(sim.Served)/allowed)
	fmt.Printf("router latency of served calls: %s\n", res.Latency)
	return nil
}
