package sim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of Config and ModelConfig, also shown by the binary's -help.
const (
	DefaultLatency      = "constant:0"
	DefaultOutput       = "uniform:20-200"
	DefaultTTFTFraction = 0.2
)

// Config is everything a Server needs. The zero value serves the default models with no
// latency and no limits.
type Config struct {
	// Models served. Empty means DefaultModels(); a configured list replaces the defaults.
	Models []ModelConfig `yaml:"models" json:"models"`
	// Seed feeds every generated answer; a request's own "seed" field overrides it.
	// Default 0.
	Seed int64 `yaml:"seed" json:"seed"`
	// TimeScale multiplies every latency and the one-minute window of the rate limits, so
	// 0.001 runs a 30 s latency in 30 ms and a 60 RPM limit as 60 requests per 60 ms.
	// Zero means 1; negative is an error.
	TimeScale float64 `yaml:"time_scale" json:"time_scale"`
	// DefaultLatency is the latency spec of models that set none. Default "constant:0".
	DefaultLatency string `yaml:"default_latency" json:"default_latency"`
	// DefaultOutput is the output-length spec (tokens) of models that set none.
	// Default "uniform:20-200".
	DefaultOutput string `yaml:"default_output" json:"default_output"`
	// TrackRepeats remembers every request served, by the digest of what decides its
	// answer, so that GET /sim/repeats can list the requests served more than once (paid
	// twice). Memory grows with every distinct request: on for fault suites, off for long
	// benchmarks. Default false.
	TrackRepeats bool `yaml:"track_repeats" json:"track_repeats"`
	// Scripts are the models' default scripts, by model name: a request for the model
	// that names no script of its own is answered by it (docs/sim-llm.md, "Scripted
	// answers"). Default none: every answer is hash-based.
	Scripts map[string]Script `yaml:"scripts" json:"scripts"`
	// Now is the clock of the rate limits and bursts. Nil means time.Now; tests freeze it so that
	// limits do not refill while the test runs. Latency waits always use real timers.
	Now func() time.Time `yaml:"-" json:"-"`
}

// ModelConfig describes one simulated model.
type ModelConfig struct {
	// Name is the model id clients send. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Latency is a latency spec (see ParseLatency). Empty means Config.DefaultLatency.
	Latency string `yaml:"latency" json:"latency"`
	// Output is the spec of the answer length in tokens (see ParseTokens). Empty means
	// Config.DefaultOutput.
	Output string `yaml:"output" json:"output"`
	// RPM is the requests-per-minute limit; 0 means unlimited.
	RPM int `yaml:"rpm" json:"rpm"`
	// TPM is the tokens-per-minute limit; 0 means unlimited.
	TPM int `yaml:"tpm" json:"tpm"`
	// ErrorRate is the fraction (0..1) of admitted requests answered with a 500 or 503,
	// for fault injection. Default 0.
	ErrorRate float64 `yaml:"error_rate" json:"error_rate"`
	// TTFTFraction is the share of a streamed answer's latency spent before the first
	// token; the rest is spread over the remaining chunks. Zero means 0.2.
	TTFTFraction float64 `yaml:"ttft_fraction" json:"ttft_fraction"`
}

// DefaultModels are served when no model is configured: enough for any OpenAI client to
// work out of the box, with no latency and no limits.
func DefaultModels() []ModelConfig {
	return []ModelConfig{
		{Name: "sim-fast", Output: "uniform:10-60"},
		{Name: "sim-large", Output: "uniform:100-400"},
		{Name: "gpt-4o-mini", Output: "uniform:20-200"},
	}
}

// LoadConfigFile reads a Config from a YAML or JSON file (JSON is read as YAML, of which
// it is a subset). Unknown fields are errors, so that a typo does not silently fall back
// to a default.
func LoadConfigFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading sim-llm config: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	// io.EOF is an empty file: all defaults.
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parsing sim-llm config %s: %w", path, err)
	}
	return c, nil
}

// modelKeys are the option names ParseModelSpec accepts.
var modelKeys = []string{"latency", "output", "rpm", "tpm", "error_rate", "ttft_fraction"}

// ParseModelSpec parses the --model flag form
// "NAME[=latency=SPEC,output=SPEC,rpm=N,tpm=N,error_rate=F,ttft_fraction=F]". Commas
// inside a spec (mix components, lognormal arguments) are kept: a comma starts a new
// option only when a known option name and "=" follow it.
func ParseModelSpec(s string) (ModelConfig, error) {
	name, opts, _ := strings.Cut(strings.TrimSpace(s), "=")
	m := ModelConfig{Name: strings.TrimSpace(name)}
	if m.Name == "" {
		return m, fmt.Errorf("model spec %q: missing name", s)
	}
	if opts == "" {
		return m, nil
	}
	var parts []string
	for p := range strings.SplitSeq(opts, ",") {
		if len(parts) > 0 && !startsOption(p) {
			parts[len(parts)-1] += "," + p
			continue
		}
		parts = append(parts, p)
	}
	for _, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return m, fmt.Errorf("model %s: option %q: want key=value", m.Name, p)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "latency":
			m.Latency = v
		case "output":
			m.Output = v
		case "rpm":
			m.RPM, err = strconv.Atoi(v)
		case "tpm":
			m.TPM, err = strconv.Atoi(v)
		case "error_rate":
			m.ErrorRate, err = strconv.ParseFloat(v, 64)
		case "ttft_fraction":
			m.TTFTFraction, err = strconv.ParseFloat(v, 64)
		default:
			return m, fmt.Errorf("model %s: unknown option %q: want one of %s", m.Name, k, strings.Join(modelKeys, ", "))
		}
		if err != nil {
			return m, fmt.Errorf("model %s: option %s=%q: %w", m.Name, k, v, err)
		}
	}
	return m, nil
}

func startsOption(p string) bool {
	k, _, ok := strings.Cut(p, "=")
	if !ok {
		return false
	}
	k = strings.TrimSpace(k)
	for _, want := range modelKeys {
		if k == want {
			return true
		}
	}
	return false
}

// model is a validated ModelConfig with its parsed distributions.
type model struct {
	cfg     ModelConfig
	latency Dist
	output  Dist
}

// validate fills defaults and parses every spec; errors name the offending field.
func (c Config) validate() (Config, []model, error) {
	c.TimeScale = cmp.Or(c.TimeScale, 1)
	if c.TimeScale < 0 || math.IsNaN(c.TimeScale) || math.IsInf(c.TimeScale, 0) {
		return c, nil, fmt.Errorf("time_scale %v: want a positive number", c.TimeScale)
	}
	c.DefaultLatency = cmp.Or(c.DefaultLatency, DefaultLatency)
	c.DefaultOutput = cmp.Or(c.DefaultOutput, DefaultOutput)
	if len(c.Models) == 0 {
		c.Models = DefaultModels()
	} else {
		// Defaults are filled in place below; never write into the caller's slice.
		c.Models = slices.Clone(c.Models)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	seen := make(map[string]bool, len(c.Models))
	models := make([]model, 0, len(c.Models))
	for i, mc := range c.Models {
		field := fmt.Sprintf("models[%d]", i)
		if mc.Name == "" {
			return c, nil, fmt.Errorf("%s.name: required", field)
		}
		field = fmt.Sprintf("models[%d] (%s)", i, mc.Name)
		if seen[mc.Name] {
			return c, nil, fmt.Errorf("%s.name: duplicate model", field)
		}
		seen[mc.Name] = true
		mc.Latency = cmp.Or(mc.Latency, c.DefaultLatency)
		mc.Output = cmp.Or(mc.Output, c.DefaultOutput)
		mc.TTFTFraction = cmp.Or(mc.TTFTFraction, DefaultTTFTFraction)
		lat, err := ParseLatency(mc.Latency)
		if err != nil {
			return c, nil, fmt.Errorf("%s.latency: %w", field, err)
		}
		out, err := ParseTokens(mc.Output)
		if err != nil {
			return c, nil, fmt.Errorf("%s.output: %w", field, err)
		}
		if mc.RPM < 0 {
			return c, nil, fmt.Errorf("%s.rpm %d: want 0 (unlimited) or more", field, mc.RPM)
		}
		if mc.TPM < 0 {
			return c, nil, fmt.Errorf("%s.tpm %d: want 0 (unlimited) or more", field, mc.TPM)
		}
		if !(mc.ErrorRate >= 0 && mc.ErrorRate <= 1) {
			return c, nil, fmt.Errorf("%s.error_rate %v: want a fraction between 0 and 1", field, mc.ErrorRate)
		}
		if !(mc.TTFTFraction > 0 && mc.TTFTFraction <= 1) {
			return c, nil, fmt.Errorf("%s.ttft_fraction %v: want a fraction in (0, 1]", field, mc.TTFTFraction)
		}
		c.Models[i] = mc
		models = append(models, model{cfg: mc, latency: lat, output: out})
	}
	return c, models, nil
}
