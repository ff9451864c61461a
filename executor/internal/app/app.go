// Package app wires an executor process: configuration, Postgres, Redis, the router
// client, the runner and the queue servers, plus the /healthz and /metrics listener.
// executor and executor-gpu are this one program with a different queue class.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/switchyard-ai/switchyard/executor/internal/config"
	"github.com/switchyard-ai/switchyard/executor/internal/gpu"
	"github.com/switchyard-ai/switchyard/executor/internal/metrics"
	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/executor/internal/runner"
	"github.com/switchyard-ai/switchyard/executor/internal/toolcall"
	"github.com/switchyard-ai/switchyard/executor/internal/worker"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/service"
)

// Main runs the executor for a queue class with the command-line arguments.
func Main(ctx context.Context, name, class string, args []string) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	if cmd != "serve" && cmd != "migrate" {
		return service.Usagef("unknown command %q (want serve or migrate)", cmd)
	}
	cfg, err := config.FromEnv(class)
	if err != nil {
		return err
	}
	log, pool, err := service.Open(ctx, name, cfg.LogLevel, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cmd == "migrate" {
		return service.Migrate(ctx, pool, log)
	}

	keyBytes, err := os.ReadFile(cfg.ServiceKeyFile)
	if err != nil {
		return fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE: %w", err)
	}
	rdb, err := redisconn.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	asynqOpt, err := redisconn.Asynq(cfg.RedisURL)
	if err != nil {
		return err
	}

	coordinator := queue.NewClientFromRedis(rdb)
	// Mutual TLS to the router when configured (SWITCHYARD_ROUTER_CA_FILE & co.).
	// As many idle connections as calls can be in flight: a connection dropped for want of an
	// idle slot costs a new (mutual TLS) handshake on the next call.
	routerTransport := &http.Transport{MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}
	if cfg.RouterCAFile != "" {
		if routerTransport.TLSClientConfig, err = routerclient.TLSConfig(cfg.RouterCAFile, cfg.RouterCertFile, cfg.RouterKeyFile); err != nil {
			return err
		}
	}
	m, err := metrics.New()
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	rn := &runner.Runner{
		DB: pool, Events: &event.Publisher{Redis: rdb}, Log: log, Metrics: m,
		Tooling:      &toolcall.Invoker{AllowPrivate: cfg.ToolAllowPrivate},
		Queue:        coordinator,
		CapacityWait: cfg.CapacityWait, MaxQueueTime: cfg.MaxQueueTime,
		Router: &routerclient.Client{
			BaseURL: cfg.RouterURL, ServiceKey: strings.TrimSpace(string(keyBytes)), Caller: "executor",
			HTTP: &http.Client{Transport: routerTransport},
		},
	}
	gpuStatus := map[string]any{}
	if cfg.Class == "gpu" {
		probe := gpu.Probe{}
		if ms, err := probe.Sample(ctx); err != nil {
			// Say it loudly: GPU-class work will run, but without an accelerator.
			log.Warn("no GPU visible; jobs run without GPU telemetry", "reason", err.Error())
			gpuStatus = map[string]any{"visible": false, "reason": err.Error()}
		} else {
			log.Info("gpus visible", "count", len(ms), "name", ms[0].Name)
			gpuStatus = map[string]any{"visible": true, "count": len(ms), "gpus": ms}
			rn.GPU = func(ctx context.Context) (any, error) { return probe.Sample(ctx) }
		}
	}
	// Bind the listener first: an executor that cannot serve /healthz must not take work.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("SWITCHYARD_EXECUTOR_ADDR: listening on %s: %w", cfg.Addr, err)
	}
	mux := asynq.NewServeMux()
	mux.HandleFunc(queue.TypeRun, rn.HandleRun)
	w := worker.New(pool, asynqOpt, mux, worker.Options{
		Class: cfg.Class, Only: cfg.Queues, TaskCheckInterval: cfg.TaskCheckInterval, IdleWait: cfg.IdleWait, ShutdownTimeout: cfg.ShutdownGrace,
		ShardSize: cfg.ShardSize, Redis: rdb,
	}, log)
	if err := w.Start(ctx); err != nil {
		ln.Close()
		return err
	}

	httpMux := http.NewServeMux()
	httpMux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		body := map[string]any{"status": "ok", "class": cfg.Class, "queues": w.Queues()}
		if cfg.Class == "gpu" {
			body["gpu"] = gpuStatus
		}
		_ = json.NewEncoder(rw).Encode(body)
	})
	httpMux.Handle("GET /metrics", m.Handler())
	httpSrv := &http.Server{Addr: cfg.Addr, Handler: httpMux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	log.Info("executor running", "class", cfg.Class, "addr", cfg.Addr, "queues", w.Queues())

	select {
	case err = <-errc:
		err = fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	case <-ctx.Done():
		err = nil
	}
	// Shutdown order: stop taking work and drain the queues; let the handlers asynq gave up
	// on at the grace's end finish their last writes; then close the listener, and the
	// deferred Redis client and Postgres pool last.
	log.Info("executor draining", "grace", cfg.ShutdownGrace)
	w.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if werr := rn.Wait(shutdownCtx); werr != nil {
		log.Warn("runs still ending at exit: their next attempt resumes them", "error", werr)
	}
	if serr := httpSrv.Shutdown(shutdownCtx); serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
