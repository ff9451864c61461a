// Command sim-llm runs Switchyard's simulated OpenAI-compatible LLM provider, for
// development, tests and benchmarks. See docs/sim-llm.md.
//
// Shutdown order on SIGINT/SIGTERM: stop accepting connections, let requests in flight
// finish for up to --shutdown-timeout (their simulated latency included), then close what
// is left.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
	"github.com/switchyard-ai/switchyard/shared/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sim-llm:", err)
		os.Exit(1)
	}
}

// options is the parsed command line.
type options struct {
	addr            string
	logLevel        string
	shutdownTimeout time.Duration
	writeTimeout    time.Duration
	cfg             sim.Config
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	opts, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := logging.New(stderr, "sim-llm", opts.logLevel)
	if err != nil {
		return err
	}
	srv, err := sim.New(opts.cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", opts.addr, err)
	}
	return serve(ctx, ln, srv, opts, log)
}

// serve answers on ln until ctx is done, then drains.
func serve(ctx context.Context, ln net.Listener, srv *sim.Server, opts options, log *slog.Logger) error {
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		// Must outlast the slowest simulated answer (40 s tails at time scale 1, streamed
		// or not); an idle-client guard matters little for a simulator.
		WriteTimeout: opts.writeTimeout,
		IdleTimeout:  2 * time.Minute,
	}
	names := make([]string, 0)
	for _, m := range srv.Models() {
		names = append(names, m.Name)
	}
	log.Info("listening", "addr", ln.Addr().String(), "models", names, "time_scale", opts.cfg.TimeScale, "seed", opts.cfg.Seed,
		"track_repeats", opts.cfg.TrackRepeats)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", opts.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), opts.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("draining requests: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("stopped")
	return nil
}

// modelFlags collects repeated --model values.
type modelFlags []string

func (m *modelFlags) String() string     { return strings.Join(*m, " ") }
func (m *modelFlags) Set(v string) error { *m = append(*m, v); return nil }

// parseOptions reads flags, with defaults from the environment, and the optional config
// file. Precedence, lowest first: built-in defaults, the config file, environment
// variables, flags. --model entries replace a file model of the same name, or add one.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("sim-llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o          options
		configPath string
		seed       int64
		timeScale  float64
		defLatency string
		defOutput  string
		repeats    bool
		models     modelFlags
		scripts    modelFlags
	)
	fs.StringVar(&o.addr, "addr", env("SIM_LLM_ADDR", "127.0.0.1:8099"), "listen address (env SIM_LLM_ADDR)")
	fs.StringVar(&configPath, "config", env("SIM_LLM_CONFIG", ""), "YAML or JSON config file with models and settings (env SIM_LLM_CONFIG)")
	fs.Int64Var(&seed, "seed", 0, "seed of every generated answer; a request's seed field overrides it (env SIM_LLM_SEED)")
	fs.Float64Var(&timeScale, "time-scale", 1, "multiplies every latency and the rate-limit window; 0.001 runs 30s in 30ms (env SIM_LLM_TIME_SCALE)")
	fs.StringVar(&defLatency, "default-latency", sim.DefaultLatency, "latency spec of models that set none (env SIM_LLM_DEFAULT_LATENCY)")
	fs.StringVar(&defOutput, "default-output", sim.DefaultOutput, "output length spec in tokens of models that set none (env SIM_LLM_DEFAULT_OUTPUT)")
	fs.BoolVar(&repeats, "track-repeats", false, "remember every request served so GET /sim/repeats lists those served twice (env SIM_LLM_TRACK_REPEATS=true)")
	fs.Var(&models, "model", "model `NAME[=latency=SPEC,output=SPEC,rpm=N,tpm=N,error_rate=F,ttft_fraction=F]`, repeatable (env SIM_LLM_MODELS, ';'-separated)")
	fs.Var(&scripts, "script", "`MODEL=PATH` of a YAML or JSON script answering the model's requests (docs/sim-llm.md), repeatable (env SIM_LLM_SCRIPTS, ';'-separated)")
	fs.StringVar(&o.logLevel, "log-level", env("SIM_LLM_LOG_LEVEL", "info"), "debug, info, warn or error (env SIM_LLM_LOG_LEVEL)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 60*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 10*time.Minute, "http.Server WriteTimeout; must exceed the longest simulated answer")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if configPath != "" {
		c, err := sim.LoadConfigFile(configPath)
		if err != nil {
			return o, err
		}
		o.cfg = c
	}
	// pick applies a flag when given, else its environment variable when set, else
	// leaves what the file (or the zero default) said.
	pick := func(flagName, envName string, apply func(string) error, flagValue func()) error {
		switch {
		case set[flagName]:
			flagValue()
		case getenv(envName) != "":
			if err := apply(getenv(envName)); err != nil {
				return fmt.Errorf("%s=%q: %w", envName, getenv(envName), err)
			}
		}
		return nil
	}
	err := errors.Join(
		pick("seed", "SIM_LLM_SEED", func(v string) (err error) { o.cfg.Seed, err = strconv.ParseInt(v, 10, 64); return },
			func() { o.cfg.Seed = seed }),
		pick("time-scale", "SIM_LLM_TIME_SCALE", func(v string) (err error) { o.cfg.TimeScale, err = strconv.ParseFloat(v, 64); return },
			func() { o.cfg.TimeScale = timeScale }),
		pick("default-latency", "SIM_LLM_DEFAULT_LATENCY", func(v string) error { o.cfg.DefaultLatency = v; return nil },
			func() { o.cfg.DefaultLatency = defLatency }),
		pick("default-output", "SIM_LLM_DEFAULT_OUTPUT", func(v string) error { o.cfg.DefaultOutput = v; return nil },
			func() { o.cfg.DefaultOutput = defOutput }),
		pick("track-repeats", "SIM_LLM_TRACK_REPEATS", func(v string) (err error) { o.cfg.TrackRepeats, err = strconv.ParseBool(v); return },
			func() { o.cfg.TrackRepeats = repeats }),
	)
	if err != nil {
		return o, err
	}
	if len(models) == 0 && getenv("SIM_LLM_MODELS") != "" {
		for m := range strings.SplitSeq(getenv("SIM_LLM_MODELS"), ";") {
			if strings.TrimSpace(m) != "" {
				models = append(models, m)
			}
		}
	}
	for _, spec := range models {
		mc, err := sim.ParseModelSpec(spec)
		if err != nil {
			return o, fmt.Errorf("--model: %w", err)
		}
		replaced := false
		for i := range o.cfg.Models {
			if o.cfg.Models[i].Name == mc.Name {
				o.cfg.Models[i], replaced = mc, true
			}
		}
		if !replaced {
			o.cfg.Models = append(o.cfg.Models, mc)
		}
	}
	if len(scripts) == 0 && getenv("SIM_LLM_SCRIPTS") != "" {
		for v := range strings.SplitSeq(getenv("SIM_LLM_SCRIPTS"), ";") {
			if strings.TrimSpace(v) != "" {
				scripts = append(scripts, v)
			}
		}
	}
	for _, spec := range scripts {
		model, path, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok || model == "" || path == "" {
			return o, fmt.Errorf("--script %q: want MODEL=PATH", spec)
		}
		sc, err := sim.LoadScriptFile(path)
		if err != nil {
			return o, fmt.Errorf("--script %s: %w", model, err)
		}
		if o.cfg.Scripts == nil {
			o.cfg.Scripts = map[string]sim.Script{}
		}
		// Replaces the config file's script of the model, as --model replaces its model.
		o.cfg.Scripts[model] = sc
	}
	if o.cfg.TimeScale == 0 {
		o.cfg.TimeScale = 1 // what sim.Config does too; set here so the start-up log shows it
	}
	return o, nil
}
