package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestParseOptionsDefaults(t *testing.T) {
	t.Parallel()
	o, err := parseOptions(nil, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8099", o.addr)
	require.Equal(t, "info", o.logLevel)
	require.InDelta(t, 1, o.cfg.TimeScale, 0)
	require.Empty(t, o.cfg.Models, "sim.New serves the default models")
	require.Empty(t, o.cfg.DefaultLatency)
}

func TestParseOptionsPrecedence(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sim.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
seed: 3
time_scale: 0.5
default_output: "constant:9"
models:
  - name: lab
    latency: 2s
    rpm: 10
  - name: other
`), 0o600))
	env := envOf(map[string]string{
		"SIM_LLM_ADDR":       "127.0.0.1:0",
		"SIM_LLM_TIME_SCALE": "0.25",
		"SIM_LLM_MODELS":     "fromenv=rpm=1",
	})
	o, err := parseOptions([]string{
		"--config", path,
		"--seed", "11",
		"--model", "lab=latency=mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s,rpm=60",
		"--model", "extra",
	}, env, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", o.addr, "env default")
	require.EqualValues(t, 11, o.cfg.Seed, "flag beats file")
	require.InDelta(t, 0.25, o.cfg.TimeScale, 0, "env beats file")
	require.Equal(t, "constant:9", o.cfg.DefaultOutput, "file beats built-in default")
	require.Equal(t, []sim.ModelConfig{
		{Name: "lab", Latency: "mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s", RPM: 60},
		{Name: "other"},
		{Name: "extra"},
	}, o.cfg.Models, "--model replaces a file model by name and adds new ones; SIM_LLM_MODELS is ignored when --model is given")

	o, err = parseOptions(nil, env, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []sim.ModelConfig{{Name: "fromenv", RPM: 1}}, o.cfg.Models)

	_, err = parseOptions([]string{"--model", "bad=rpm=x"}, envOf(nil), io.Discard)
	require.Error(t, err)
	_, err = parseOptions(nil, envOf(map[string]string{"SIM_LLM_SEED": "x"}), io.Discard)
	require.ErrorContains(t, err, "SIM_LLM_SEED")

	o, err = parseOptions(nil, envOf(map[string]string{"SIM_LLM_TRACK_REPEATS": "true"}), io.Discard)
	require.NoError(t, err)
	require.True(t, o.cfg.TrackRepeats)
	o, err = parseOptions([]string{"--track-repeats=false"}, envOf(map[string]string{"SIM_LLM_TRACK_REPEATS": "true"}), io.Discard)
	require.NoError(t, err)
	require.False(t, o.cfg.TrackRepeats, "flag beats env")
}

func TestParseOptionsScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "lab.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
rules:
  - name: plan
    match: {call: plan}
    answers:
      - json: {steps: [{step_id: s1, depends_on: []}]}
      - tool_calls: [{name: search, arguments: {q: paris, n: 2}}]
`), 0o600))
	o, err := parseOptions([]string{"--model", "lab", "--script", "lab=" + path}, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Len(t, o.cfg.Scripts["lab"].Rules, 1)
	s, err := sim.New(o.cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	st, ok := s.ScriptState("model:lab")
	require.True(t, ok)
	require.Equal(t, 2, st.Rules[0].Answers)

	o, err = parseOptions(nil, envOf(map[string]string{"SIM_LLM_SCRIPTS": "sim-fast=" + path + ";"}), io.Discard)
	require.NoError(t, err)
	require.Contains(t, o.cfg.Scripts, "sim-fast")

	// The config file's scripts, replaced by --script for the same model.
	cfgPath := filepath.Join(dir, "sim.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
models: [{name: lab}, {name: other}]
scripts:
  lab: {rules: [{answers: [{content: from the file}]}]}
  other: {rules: [{answers: [{hash: true}]}]}
`), 0o600))
	o, err = parseOptions([]string{"--config", cfgPath, "--script", "lab=" + path}, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "plan", o.cfg.Scripts["lab"].Rules[0].Name)
	require.True(t, o.cfg.Scripts["other"].Rules[0].Answers[0].Hash)

	_, err = parseOptions([]string{"--script", path}, envOf(nil), io.Discard)
	require.ErrorContains(t, err, "MODEL=PATH")
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("rules:\n  - answers: [{content: a, json: {}}]\n"), 0o600))
	_, err = parseOptions([]string{"--script", "lab=" + bad}, envOf(nil), io.Discard)
	require.ErrorContains(t, err, "exactly one of")
	_, err = parseOptions([]string{"--script", "lab=" + filepath.Join(dir, "missing.yaml")}, envOf(nil), io.Discard)
	require.Error(t, err)
}

// TestServeDrainsOnCancel runs the real server on a real listener, answers a request, and
// shuts down cleanly when its context ends (what SIGTERM does).
func TestServeDrainsOnCancel(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"--time-scale", "0.001"}, envOf(nil), io.Discard)
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	srv, err := sim.New(o.cfg, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, srv, o, log) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}
