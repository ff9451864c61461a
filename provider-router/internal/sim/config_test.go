package sim_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func TestParseModelSpec(t *testing.T) {
	t.Parallel()
	m, err := sim.ParseModelSpec("lab=latency=mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s,rpm=60,tpm=90000,output=lognormal:300,0.4,error_rate=0.02,ttft_fraction=0.1")
	require.NoError(t, err)
	require.Equal(t, sim.ModelConfig{
		Name:         "lab",
		Latency:      "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s",
		Output:       "lognormal:300,0.4",
		RPM:          60,
		TPM:          90000,
		ErrorRate:    0.02,
		TTFTFraction: 0.1,
	}, m)

	m, err = sim.ParseModelSpec("plain")
	require.NoError(t, err)
	require.Equal(t, sim.ModelConfig{Name: "plain"}, m)

	for _, bad := range []string{"", "=rpm=1", "m=rpm=x", "m=colour=red", "m=rpm"} {
		_, err := sim.ParseModelSpec(bad)
		require.Error(t, err, bad)
	}
}

func TestLoadConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "sim.yaml")
	require.NoError(t, os.WriteFile(yamlPath, []byte(`
seed: 7
time_scale: 0.01
default_latency: 100ms
models:
  - name: lab
    latency: "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s"
    output: "uniform:50-500"
    rpm: 500
    tpm: 200000
    error_rate: 0.01
  - name: quick
`), 0o600))
	c, err := sim.LoadConfigFile(yamlPath)
	require.NoError(t, err)
	require.EqualValues(t, 7, c.Seed)
	require.InDelta(t, 0.01, c.TimeScale, 1e-12)
	require.Len(t, c.Models, 2)
	require.Equal(t, 500, c.Models[0].RPM)

	s, err := sim.New(c, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	models := s.Models()
	require.Equal(t, "100ms", models[1].Latency, "the default latency fills models that set none")
	require.Equal(t, sim.DefaultOutput, models[1].Output)
	require.InDelta(t, sim.DefaultTTFTFraction, models[0].TTFTFraction, 0)

	jsonPath := filepath.Join(dir, "sim.json")
	require.NoError(t, os.WriteFile(jsonPath, []byte(`{"models":[{"name":"j","rpm":3}]}`), 0o600))
	c, err = sim.LoadConfigFile(jsonPath)
	require.NoError(t, err)
	require.Equal(t, []sim.ModelConfig{{Name: "j", RPM: 3}}, c.Models)

	typo := filepath.Join(dir, "typo.yaml")
	require.NoError(t, os.WriteFile(typo, []byte("models:\n  - name: m\n    rmp: 3\n"), 0o600))
	_, err = sim.LoadConfigFile(typo)
	require.ErrorContains(t, err, "rmp")

	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	c, err = sim.LoadConfigFile(empty)
	require.NoError(t, err)
	require.Empty(t, c.Models)
}

func TestConfigValidationNamesTheField(t *testing.T) {
	t.Parallel()
	for want, cfg := range map[string]sim.Config{
		"models[0] (m).latency":    {Models: []sim.ModelConfig{{Name: "m", Latency: "soon"}}},
		"models[0] (m).output":     {Models: []sim.ModelConfig{{Name: "m", Output: "lots"}}},
		"models[1].name":           {Models: []sim.ModelConfig{{Name: "m"}, {}}},
		"models[1] (m).name":       {Models: []sim.ModelConfig{{Name: "m"}, {Name: "m"}}},
		"models[0] (m).rpm":        {Models: []sim.ModelConfig{{Name: "m", RPM: -1}}},
		"models[0] (m).error_rate": {Models: []sim.ModelConfig{{Name: "m", ErrorRate: 1.5}}},
		"time_scale":               {TimeScale: -1},
	} {
		_, err := sim.New(cfg, slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, want)
	}
}

func TestConfigIsNotMutated(t *testing.T) {
	t.Parallel()
	models := []sim.ModelConfig{{Name: "m"}}
	_, err := sim.New(sim.Config{Models: models}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, []sim.ModelConfig{{Name: "m"}}, models)
}
