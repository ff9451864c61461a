package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Dist is a probability distribution over non-negative values, parsed from the spec syntax
// of docs/sim-llm.md. The same syntax serves latencies (values are durations, held in
// seconds) and output lengths (values are token counts).
type Dist interface {
	// Sample draws one value from r. It never returns a negative value.
	Sample(r *rand.Rand) float64
	// Mean is the expected value, used for documentation, stats and tests.
	Mean() float64
	// String is the spec the distribution was parsed from, normalised.
	String() string
}

// ParseLatency parses a latency spec: constant:<d>, uniform:<min>-<max>,
// lognormal:<median>,<sigma>, mix:<w>*<spec>,<w>*<spec>... or a bare duration (constant).
// Durations use Go syntax ("250ms", "1.5s"); a bare "0" is zero. Samples are in seconds.
func ParseLatency(spec string) (Dist, error) {
	return parseDist(spec, parseSeconds, formatSeconds)
}

// ParseTokens parses an output-length spec in the same syntax as ParseLatency, with plain
// numbers for token counts: "constant:50", "uniform:20-200", "lognormal:120,0.6".
func ParseTokens(spec string) (Dist, error) {
	return parseDist(spec, parseCount, formatCount)
}

// LatencyDuration converts a latency sample (seconds) into a duration, multiplied by
// scale (the --time-scale factor).
func LatencyDuration(seconds, scale float64) time.Duration {
	return time.Duration(seconds * scale * float64(time.Second))
}

// waitFor blocks for d or until ctx is done, whichever comes first, and reports whether
// the full duration elapsed. A timer rather than time.Sleep, so that thousands of slow
// requests whose clients went away free their goroutines at once.
func waitFor(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type (
	valueParser    func(string) (float64, error)
	valueFormatter func(float64) string
)

func parseSeconds(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 250ms or 1.5s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d.Seconds(), nil
}

func formatSeconds(v float64) string {
	return time.Duration(v * float64(time.Second)).String()
}

func parseCount(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
}

func formatCount(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func parseDist(spec string, pv valueParser, fv valueFormatter) (Dist, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("empty distribution spec")
	}
	kind, args, ok := strings.Cut(spec, ":")
	if !ok {
		// A bare value is the common case for "no variance": --default-latency 200ms.
		v, err := pv(spec)
		if err != nil {
			return nil, fmt.Errorf("distribution %q: want kind:args or a bare value: %w", spec, err)
		}
		return constant{v: v, fv: fv}, nil
	}
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case "constant", "const":
		v, err := pv(args)
		if err != nil {
			return nil, fmt.Errorf("constant: %w", err)
		}
		return constant{v: v, fv: fv}, nil
	case "uniform":
		lo, hi, ok := strings.Cut(args, "-")
		if !ok {
			return nil, fmt.Errorf("uniform %q: want uniform:<min>-<max>", args)
		}
		a, err := pv(lo)
		if err != nil {
			return nil, fmt.Errorf("uniform min: %w", err)
		}
		b, err := pv(hi)
		if err != nil {
			return nil, fmt.Errorf("uniform max: %w", err)
		}
		if b < a {
			return nil, fmt.Errorf("uniform %q: max is below min", args)
		}
		return uniform{lo: a, hi: b, fv: fv}, nil
	case "lognormal":
		med, sig, ok := strings.Cut(args, ",")
		if !ok {
			return nil, fmt.Errorf("lognormal %q: want lognormal:<median>,<sigma>", args)
		}
		m, err := pv(med)
		if err != nil {
			return nil, fmt.Errorf("lognormal median: %w", err)
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(sig), 64)
		if err != nil || s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("lognormal sigma %q: want a non-negative number", sig)
		}
		return lognormal{median: m, sigma: s, fv: fv}, nil
	case "mix":
		return parseMix(args, pv, fv)
	default:
		return nil, fmt.Errorf("distribution kind %q: want constant, uniform, lognormal or mix", kind)
	}
}

// parseMix reads "<w>*<spec>,<w>*<spec>...". Commas also separate lognormal's arguments,
// so a comma starts a new component only when the text after it is "<number>*"; anything
// else belongs to the component before it.
func parseMix(args string, pv valueParser, fv valueFormatter) (Dist, error) {
	var parts []string
	for p := range strings.SplitSeq(args, ",") {
		if len(parts) > 0 && !startsWeighted(p) {
			parts[len(parts)-1] += "," + p
			continue
		}
		parts = append(parts, p)
	}
	m := mixture{fv: fv}
	var total float64
	for _, p := range parts {
		ws, sub, ok := strings.Cut(p, "*")
		if !ok {
			return nil, fmt.Errorf("mix component %q: want <weight>*<spec>", p)
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(ws), 64)
		if err != nil || w <= 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("mix weight %q: want a positive number", ws)
		}
		if k, _, _ := strings.Cut(strings.TrimSpace(sub), ":"); strings.EqualFold(k, "mix") {
			return nil, fmt.Errorf("mix component %q: mixtures do not nest", p)
		}
		d, err := parseDist(sub, pv, fv)
		if err != nil {
			return nil, fmt.Errorf("mix component %q: %w", p, err)
		}
		total += w
		m.weights = append(m.weights, w)
		m.parts = append(m.parts, d)
	}
	if len(m.parts) == 0 {
		return nil, fmt.Errorf("mix has no components")
	}
	// Weights are normalised so that "mix:19*a,1*b" and "mix:0.95*a,0.05*b" mean the same.
	acc := 0.0
	m.cum = make([]float64, len(m.weights))
	for i, w := range m.weights {
		acc += w / total
		m.cum[i] = acc
		m.weights[i] = w / total
	}
	return m, nil
}

func startsWeighted(p string) bool {
	w, _, ok := strings.Cut(p, "*")
	if !ok {
		return false
	}
	_, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
	return err == nil
}

type constant struct {
	v  float64
	fv valueFormatter
}

func (c constant) Sample(*rand.Rand) float64 { return c.v }
func (c constant) Mean() float64             { return c.v }
func (c constant) String() string            { return "constant:" + c.fv(c.v) }

type uniform struct {
	lo, hi float64
	fv     valueFormatter
}

func (u uniform) Sample(r *rand.Rand) float64 { return u.lo + r.Float64()*(u.hi-u.lo) }
func (u uniform) Mean() float64               { return (u.lo + u.hi) / 2 }
func (u uniform) String() string              { return "uniform:" + u.fv(u.lo) + "-" + u.fv(u.hi) }

// lognormal is parameterised by its median and the standard deviation of the underlying
// normal (sigma), because a median is what people can read off a latency chart; the mean
// is median*exp(sigma²/2).
type lognormal struct {
	median, sigma float64
	fv            valueFormatter
}

func (l lognormal) Sample(r *rand.Rand) float64 { return l.median * math.Exp(l.sigma*r.NormFloat64()) }
func (l lognormal) Mean() float64               { return l.median * math.Exp(l.sigma*l.sigma/2) }
func (l lognormal) String() string {
	return "lognormal:" + l.fv(l.median) + "," + strconv.FormatFloat(l.sigma, 'g', -1, 64)
}

type mixture struct {
	weights []float64 // normalised
	cum     []float64 // cumulative weights, last is 1 up to rounding
	parts   []Dist
	fv      valueFormatter
}

func (m mixture) Sample(r *rand.Rand) float64 {
	u := r.Float64()
	for i, c := range m.cum {
		if u < c {
			return m.parts[i].Sample(r)
		}
	}
	return m.parts[len(m.parts)-1].Sample(r)
}

func (m mixture) Mean() float64 {
	var s float64
	for i, p := range m.parts {
		s += m.weights[i] * p.Mean()
	}
	return s
}

func (m mixture) String() string {
	var b strings.Builder
	b.WriteString("mix:")
	for i, p := range m.parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(m.weights[i], 'g', 4, 64))
		b.WriteByte('*')
		b.WriteString(p.String())
	}
	return b.String()
}
