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
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/routerstack"
)

// callType is one kind of LLM call of the research agent.
type callType struct {
	name        string
	prompt, out int // tokens
}

// The seed's strict pipeline: stages run in order, each stage's calls in parallel.
var pipeline = [][]callType{
	{{"planner", 300, 300}},
	{{"analyst_statistical", 500, 100}, {"analyst_deep", 500, 1500}, {"analyst_market", 500, 500},
		{"analyst_risk", 500, 700}, {"analyst_history", 500, 400}},
	{{"synthesizer", 3500, 900}},
	{{"reviewer_facts", 1200, 250}, {"reviewer_citations", 1200, 350}, {"reviewer_style", 1200, 200}},
	{{"final", 2200, 1000}},
}

// profile is a rate-limit regime of the seed (per minute, uncompressed).
type profile struct {
	name     string
	rpm, tpm int
}

var profiles = map[string]profile{
	"rpm": {"RPM-bound (RPM=20, TPM=200K)", 20, 200_000},
	"tpm": {"TPM-bound (RPM=60, TPM=40K)", 60, 40_000},
}

func main() {
	k := flag.Float64("k", 30, "time compression factor")
	sessions := flag.Int("sessions", 30, "concurrent sessions per run")
	profs := flag.String("profile", "rpm,tpm", "rate-limit regimes: rpm, tpm")
	arrivals := flag.String("arrival", "constant", "arrival patterns: constant (every 4 s), bursty (2-5 sessions 0.5-2 s apart, 15-35 s gaps)")
	seed := flag.Uint64("seed", 3, "seed of arrivals")
	latency := flag.String("latency", "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s", "sim-llm latency spec (uncompressed)")
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
		p, ok := profiles[name]
		if !ok {
			return fmt.Errorf("unknown profile %q", name)
		}
		models = append(models, "--model", fmt.Sprintf("%s=latency=%s,output=constant:4000,rpm=%d,tpm=%d", name, latency, p.rpm, p.tpm))
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
		p := profiles[name]
		for _, arrival := range strings.Split(arrivals, ",") {
			starts, err := arrivalTimes(arrival, sessions, k, seed)
			if err != nil {
				return err
			}
			res := map[string]result{}
			for _, mode := range []string{"fifo", "progress"} {
				_, _ = http.Post(simURL+"/sim/reset", "application/json", nil)
				org, err := st.NewOrg(context.Background(), simURL+"/v1", name, int(float64(p.rpm)*k), int(float64(p.tpm)*k))
				if err != nil {
					return err
				}
				r := play(client, routerURL, st, org, mode, starts, k)
				sim, _ := routerstack.SimStats(simURL)
				r.upstream429 = sim.Refused429
				res[mode] = r
				fmt.Printf("%-32s %-8s %-8s sessions=%d mean=%6.1fs p95=%6.1fs (uncompressed) errors=%d upstream_429=%d wall=%s\n",
					p.name, arrival, mode, len(r.makespans), r.mean(), r.p95(), r.errors, r.upstream429, r.wall.Round(time.Millisecond))
			}
			f, g := res["fifo"], res["progress"]
			fmt.Printf("%-32s %-8s progress vs FIFO: mean %+.1f%%, p95 %+.1f%%\n", p.name, arrival,
				100*(g.mean()/f.mean()-1), 100*(g.p95()/f.p95()-1))
		}
	}
	return nil
}

// arrivalTimes returns each session's start offset (compressed).
func arrivalTimes(pattern string, n int, k float64, seed uint64) ([]time.Duration, error) {
	rng := rand.New(rand.NewPCG(seed, 3))
	scale := func(s float64) time.Duration { return time.Duration(s / k * float64(time.Second)) }
	out := make([]time.Duration, 0, n)
	switch pattern {
	case "constant":
		for i := range n {
			out = append(out, scale(4*float64(i)))
		}
	case "bursty":
		t := 0.0
		for len(out) < n {
			for range 2 + rng.IntN(4) {
				if len(out) == n {
					break
				}
				out = append(out, scale(t))
				t += 0.5 + 1.5*rng.Float64()
			}
			t += 15 + 20*rng.Float64()
		}
	default:
		return nil, fmt.Errorf("unknown arrival %q", pattern)
	}
	return out, nil
}

type result struct {
	makespans   []float64 // seconds, uncompressed
	errors      int
	upstream429 int64
	wall        time.Duration
}

func (r result) mean() float64 {
	s := 0.0
	for _, m := range r.makespans {
		s += m
	}
	return s / float64(max(len(r.makespans), 1))
}

func (r result) p95() float64 {
	if len(r.makespans) == 0 {
		return 0
	}
	s := slices.Clone(r.makespans)
	slices.Sort(s)
	return s[int(math.Ceil(0.95*float64(len(s))))-1]
}

// words fills a prompt of about n tokens (4 characters each, as sim-llm counts them).
func words(n int) string {
	var b strings.Builder
	for b.Len() < 4*n {
		b.WriteString("route ")
	}
	return b.String()
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
			for _, stage := range pipeline {
				var sw sync.WaitGroup
				for _, ct := range stage {
					sw.Go(func() {
						group := session
						if mode == "fifo" {
							group = routerstack.UUID() // every call its own group: ties, so arrival order
						}
						if err := call(client, url, st, org, group, run+"/"+ct.name, ct); err != nil {
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

func call(client *http.Client, url string, st *routerstack.Stack, org routerstack.Org, group, jobType string, ct callType) error {
	body, _ := json.Marshal(map[string]any{
		"max_tokens": ct.out,
		"messages":   []map[string]string{{"role": "system", "content": "You are the " + ct.name + "."}, {"role": "user", "content": words(ct.prompt)}},
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
		return fmt.Errorf("%s: %d %s", ct.name, resp.StatusCode, raw)
	}
	return nil
}
