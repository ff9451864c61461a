// Command scenario plays seed 003's scheduling experiment against the real provider router
// and sim-llm: many concurrent agent sessions, each a chain of stages with barrier sync
// (1 planner → 5 analysts → 1 synthesizer → 3 reviewers → 1 final call), call types with
// different output sizes, constant or bursty arrivals, under an RPM-bound or a TPM-bound
// limit. Each scenario runs twice — calls grouped by session (the router's progress-aware
// order: fewest calls in flight first) and calls as their own groups (plain FIFO) — and
// reports mean and p95 session makespan.
//
// Time is compressed by -k: sim-llm runs with --time-scale 1/k (latencies and its limit
// window shrink k-fold) and the router's limits are the seed's × k per real minute. The
// router's bucket holds a whole (real) minute of that, k times the seed's burst, but the
// provider's x-ratelimit-remaining headers (sim-llm sends them, with its own, scaled,
// bucket) lower it to the provider's figure after the first answer — the feedback path the
// router uses in production — so the compressed run keeps the seed's shape.
//
//	go run ./bench/cmd/scenario -k 30 -sessions 30 -profile rpm,tpm -arrival constant
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/routerstack"
	"github.com/switchyard-ai/switchyard/bench/internal/workload"
)

func main() {
	k := flag.Float64("k", 30, "time compression factor")
	sessions := flag.Int("sessions", 30, "concurrent sessions per run")
	profs := flag.String("profile", "rpm,tpm", "rate-limit regimes: rpm, tpm")
	arrivals := flag.String("arrival", "constant", "arrival patterns: "+workload.ArrivalHelp)
	seed := flag.Uint64("seed", 3, "seed of arrivals")
	latency := flag.String("latency", workload.Latency, "sim-llm latency spec (uncompressed)")
	bin := flag.String("bin", "", "directory with provider-router and sim-llm (default: go build them)")
	flag.Parse()
	if err := run(*k, *sessions, *profs, *arrivals, *seed, *latency, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		os.Exit(1)
	}
}

func run(k float64, sessions int, profs, arrivals string, seed uint64, latency, bin string) error {
	st, err := routerstack.Start(bin)
	if err != nil {
		return err
	}
	defer st.Close()
	var models []string
	for _, name := range strings.Split(profs, ",") {
		p, ok := workload.Profiles[name]
		if !ok {
			return fmt.Errorf("unknown profile %q", name)
		}
		models = append(models, "--model", workload.SimModel(name, latency, p))
	}
	simURL, err := st.StartSim(append([]string{"--time-scale", fmt.Sprint(1 / k)}, models...)...)
	if err != nil {
		return err
	}
	routerURL, err := st.StartRouter()
	if err != nil {
		return err
	}
	client := st.Client(512)
	fmt.Printf("scenario: %d sessions × 11 calls (1→5→1→3→1), time compressed %gx, latency %s\n", sessions, k, latency)
	for _, name := range strings.Split(profs, ",") {
		p := workload.Profiles[name]
		for _, arrival := range strings.Split(arrivals, ",") {
			starts, err := workload.Arrivals(arrival, sessions, k, seed)
			if err != nil {
				return err
			}
			res := map[string]result{}
			for _, mode := range []string{"fifo", "progress"} {
				_, _ = http.Post(simURL+"/sim/reset", "application/json", nil)
				org, err := st.NewOrg(context.Background(), simURL+"/v1", name, int(float64(p.RPM)*k), int(float64(p.TPM)*k))
				if err != nil {
					return err
				}
				r := play(client, routerURL, st, org, mode, starts, k)
				sim, _ := routerstack.SimStats(simURL)
				r.upstream429 = sim.Refused429
				res[mode] = r
				fmt.Printf("%-32s %-8s %-8s sessions=%d mean=%6.1fs p95=%6.1fs (uncompressed) errors=%d upstream_429=%d wall=%s\n",
					p.Name, arrival, mode, len(r.makespans), r.makespans.Mean(), r.makespans.P95(), r.errors, r.upstream429, r.wall.Round(time.Millisecond))
			}
			f, g := res["fifo"], res["progress"]
			fmt.Printf("%-32s %-8s progress vs FIFO: mean %+.1f%%, p95 %+.1f%%\n", p.Name, arrival,
				100*(g.makespans.Mean()/f.makespans.Mean()-1), 100*(g.makespans.P95()/f.makespans.P95()-1))
		}
	}
	return nil
}

type result struct {
	makespans   workload.Makespans
	errors      int
	upstream429 int64
	wall        time.Duration
}

// play runs every session of one scenario in one mode and measures makespans.
func play(client *http.Client, url string, st *routerstack.Stack, org routerstack.Org, mode string, starts []time.Duration, k float64) result {
	run := routerstack.UUID()[:8] // a fresh estimator history per run: both modes start cold
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	begin := time.Now()
	for _, offset := range starts {
		wg.Go(func() {
			time.Sleep(time.Until(begin.Add(offset)))
			session := routerstack.UUID()
			start := time.Now()
			failed := false
			for _, stage := range workload.Pipeline {
				var sw sync.WaitGroup
				for _, ct := range stage {
					sw.Go(func() {
						group := session
						if mode == "fifo" {
							group = routerstack.UUID() // every call its own group: ties, so arrival order
						}
						if err := call(client, url, st, org, group, run+"/"+ct.Name, ct); err != nil {
							mu.Lock()
							res.errors++
							failed = true
							mu.Unlock()
							fmt.Fprintln(os.Stderr, "scenario:", err)
						}
					})
				}
				sw.Wait() // the barrier
			}
			mu.Lock()
			if !failed {
				res.makespans = append(res.makespans, time.Since(start).Seconds()*k)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.wall = time.Since(begin)
	return res
}

func call(client *http.Client, url string, st *routerstack.Stack, org routerstack.Org, group, jobType string, ct workload.CallType) error {
	body, _ := json.Marshal(map[string]any{
		"max_tokens": ct.Out,
		"messages":   []map[string]string{{"role": "system", "content": "You are the " + ct.Name + "."}, {"role": "user", "content": workload.Words(ct.Prompt)}},
	})
	req, _ := http.NewRequest(http.MethodPost, url+"/internal/ai/chat", strings.NewReader(string(body)))
	req.Header = st.Headers(org)
	req.Header.Set("X-Job-ID", group)
	req.Header.Set("X-Job-Type", jobType)
	req.Header.Set("X-Deadline", time.Now().Add(30*time.Minute).UTC().Format(time.RFC3339Nano))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", ct.Name, resp.StatusCode, raw)
	}
	return nil
}
