// Package stats summarises latency samples for the bench tools.
package stats

import (
	"fmt"
	"slices"
	"time"
)

// Summary holds the percentiles of a sample.
type Summary struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
	P999                    time.Duration
	Mean                    time.Duration
}

// Summarize computes percentiles (nearest rank) of samples.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Summary{N: len(s), Min: s[0], P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999),
		Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

func (s Summary) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("n=%d min=%s p50=%s p90=%s p99=%s p99.9=%s max=%s mean=%s",
		s.N, ms(s.Min), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.P999), ms(s.Max), ms(s.Mean))
}
