package sim_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func TestParseLatency(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"0":                   "constant:0s",
		"250ms":               "constant:250ms",
		"constant:2s":         "constant:2s",
		"uniform:1s-5s":       "uniform:1s-5s",
		"lognormal:800ms,0.5": "lognormal:800ms,0.5",
		"mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s": "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s",
		// Weights are normalised; commas inside lognormal stay with their component.
		"mix:19*lognormal:1s,0.3,1*constant:30s": "mix:0.95*lognormal:1s,0.3,0.05*constant:30s",
	} {
		d, err := sim.ParseLatency(spec)
		require.NoError(t, err, spec)
		require.Equal(t, want, d.String(), spec)
	}
	for _, bad := range []string{
		"", "fast", "uniform:5s", "uniform:5s-1s", "uniform:1s-x", "lognormal:1s", "lognormal:1s,-1",
		"normal:1s", "mix:", "mix:0.5*constant:1s,foo", "mix:-1*constant:1s", "mix:1*mix:1*constant:1s",
		"constant:-1s", "constant:5",
	} {
		_, err := sim.ParseLatency(bad)
		require.Error(t, err, bad)
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	d, err := sim.ParseTokens("uniform:20-200")
	require.NoError(t, err)
	require.InDelta(t, 110, d.Mean(), 1e-9)
	d, err = sim.ParseTokens("50")
	require.NoError(t, err)
	require.Equal(t, "constant:50", d.String())
	_, err = sim.ParseTokens("uniform:1s-2s")
	require.Error(t, err)
}

// sample draws n values from spec with a fixed PRNG.
func sample(t *testing.T, spec string, n int) []float64 {
	t.Helper()
	d, err := sim.ParseLatency(spec)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]float64, n)
	for i := range out {
		out[i] = d.Sample(r)
	}
	return out
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func TestLatencySampling(t *testing.T) {
	t.Parallel()
	const n = 20000

	t.Run("constant", func(t *testing.T) {
		t.Parallel()
		for _, v := range sample(t, "constant:1.5s", 100) {
			require.Equal(t, 1.5, v)
		}
	})
	t.Run("uniform", func(t *testing.T) {
		t.Parallel()
		xs := sample(t, "uniform:1s-5s", n)
		require.GreaterOrEqual(t, slices.Min(xs), 1.0)
		require.LessOrEqual(t, slices.Max(xs), 5.0)
		require.InDelta(t, 3.0, mean(xs), 0.05) // sd of the mean ≈ 1.15/√n ≈ 0.008
		below2 := 0
		for _, x := range xs {
			if x < 2 {
				below2++
			}
		}
		require.InDelta(t, 0.25, float64(below2)/n, 0.02)
	})
	t.Run("lognormal", func(t *testing.T) {
		t.Parallel()
		xs := sample(t, "lognormal:2s,0.5", n)
		slices.Sort(xs)
		require.InDelta(t, 2.0, xs[n/2], 0.06, "median")
		require.InDelta(t, 2*math.Exp(0.125), mean(xs), 0.05, "mean is median·e^(σ²/2)")
		// 84th percentile is median·e^σ.
		require.InDelta(t, 2*math.Exp(0.5), xs[int(0.8413*n)], 0.12)
		require.Positive(t, xs[0])
	})
	t.Run("lab workload mixture", func(t *testing.T) {
		t.Parallel()
		xs := sample(t, "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s", n)
		slow := 0
		for _, x := range xs {
			switch {
			case x >= 20 && x <= 40:
				slow++
			case x >= 1 && x <= 5:
			default:
				t.Fatalf("sample %v outside both components", x)
			}
		}
		require.InDelta(t, 0.05, float64(slow)/n, 0.008) // sd ≈ 0.0015
		d, err := sim.ParseLatency("mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s")
		require.NoError(t, err)
		require.InDelta(t, 0.95*3+0.05*30, d.Mean(), 1e-9)
		require.InDelta(t, d.Mean(), mean(xs), 0.15)
	})
}

func TestLatencyDurationTimeScale(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30*time.Second, sim.LatencyDuration(30, 1))
	require.Equal(t, 30*time.Millisecond, sim.LatencyDuration(30, 0.001))
	require.Equal(t, time.Duration(0), sim.LatencyDuration(0, 5))
}

// TestTimeScaleMakesLongLatencyShort runs a 30 s model at scale 0.0001 (3 ms): the test
// finishing at all is the check; no wall-clock assertion.
func TestTimeScaleMakesLongLatencyShort(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{
		Models:    []sim.ModelConfig{{Name: "slow", Latency: "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s"}, {Name: "s30", Latency: "30s"}},
		TimeScale: 0.0001,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, m := range []string{"slow", "s30"} {
		_, err := b.client.CreateChatCompletion(ctx, userRequest(m, "hi"))
		require.NoError(t, err)
	}
	require.EqualValues(t, 2, b.stats(t).Total.Served)
}

// TestLatencyRespectsCancellation: a request waiting out a one-hour latency ends when
// its client gives up, and is counted as cancelled.
func TestLatencyRespectsCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "slow", Latency: "constant:1h"}}})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.client.CreateChatCompletion(ctx, userRequest("slow", "hi"))
		errc <- err
	}()
	eventually(t, func() bool { return b.stats(t).Models["slow"].InFlight == 1 }, "request in flight")
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	eventually(t, func() bool {
		st := b.stats(t).Models["slow"]
		return st.InFlight == 0 && st.Cancelled == 1
	}, "request released and counted as cancelled")
}
