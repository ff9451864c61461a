// Package workload is seed 003's scheduling experiment as data: the research agent's
// pipeline of call types (1 planner → 5 analysts → 1 synthesizer → 3 reviewers → 1 final
// call, a barrier after each stage), the two rate-limit regimes, the arrival patterns and
// the makespan summary. bench/cmd/scenario plays it against the router directly,
// bench/cmd/chainscenario through the whole platform as chains.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// CallType is one kind of LLM call of the research agent.
type CallType struct {
	Name        string
	Prompt, Out int // tokens
}

// Pipeline is the seed's strict pipeline: stages run in order, each stage's calls in
// parallel.
var Pipeline = [][]CallType{
	{{"planner", 300, 300}},
	{{"analyst_statistical", 500, 100}, {"analyst_deep", 500, 1500}, {"analyst_market", 500, 500},
		{"analyst_risk", 500, 700}, {"analyst_history", 500, 400}},
	{{"synthesizer", 3500, 900}},
	{{"reviewer_facts", 1200, 250}, {"reviewer_citations", 1200, 350}, {"reviewer_style", 1200, 200}},
	{{"final", 2200, 1000}},
}

// Profile is a rate-limit regime of the seed (per minute, uncompressed).
type Profile struct {
	Name     string
	RPM, TPM int
}

// Profiles are the seed's regimes by their flag names.
var Profiles = map[string]Profile{
	"rpm": {"RPM-bound (RPM=20, TPM=200K)", 20, 200_000},
	"tpm": {"TPM-bound (RPM=60, TPM=40K)", 60, 40_000},
}

// Latency is the seed's call latency (uncompressed), a sim-llm latency spec.
const Latency = "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s"

// SimModel is sim-llm's --model value for a model named name with the profile's limits:
// outputs always longer than any call type's max_tokens, so max_tokens sets each call's
// output size.
func SimModel(name, latency string, p Profile) string {
	return fmt.Sprintf("%s=latency=%s,output=constant:4000,rpm=%d,tpm=%d", name, latency, p.RPM, p.TPM)
}

// ArrivalHelp describes the patterns Arrivals knows.
const ArrivalHelp = "constant (every 4 s), bursty (2-5 sessions 0.5-2 s apart, 15-35 s gaps)"

// Arrivals returns each session's start offset, compressed k-fold.
func Arrivals(pattern string, n int, k float64, seed uint64) ([]time.Duration, error) {
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

// Words fills a prompt of about n tokens (4 characters each, as sim-llm counts them).
func Words(n int) string {
	var b strings.Builder
	for b.Len() < 4*n {
		b.WriteString("route ")
	}
	return b.String()
}

// Makespans are session makespans in seconds, uncompressed.
type Makespans []float64

// Mean is their mean (0 for none).
func (m Makespans) Mean() float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s / float64(max(len(m), 1))
}

// P95 is their 95th percentile, nearest rank (0 for none).
func (m Makespans) P95() float64 {
	if len(m) == 0 {
		return 0
	}
	s := slices.Clone(m)
	slices.Sort(s)
	return s[int(math.Ceil(0.95*float64(len(s))))-1]
}
