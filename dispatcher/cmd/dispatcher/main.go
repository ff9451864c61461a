// Command dispatcher is Switchyard's stateless front door: it authenticates, validates,
// governs and records jobs and puts them on their named queues. It never calls an LLM.
//
//	dispatcher serve       serve the HTTP API (default)
//	dispatcher migrate     apply database migrations and exit
//	dispatcher bootstrap   prepare the development organisation and exit
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/config"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/service"
)

const usage = `Usage: dispatcher [command]

Switchyard's front door: authenticates, validates, governs and records jobs and puts them
on their named queues. It never calls an LLM.

Commands:
  serve       serve the HTTP API, the web UI and the event stream (default)
  migrate     apply database migrations and exit
  bootstrap   prepare an organisation (admin key, sim-llm provider, skills, tools) and exit;
              dispatcher bootstrap --help lists its flags
  help        print this help

Environment:
  SWITCHYARD_DATABASE_URL     Postgres (required)
  SWITCHYARD_REDIS_URL        Redis (required)
  SWITCHYARD_DISPATCHER_ADDR  listen address (default 127.0.0.1:8080)
  SWITCHYARD_LOG_LEVEL        debug, info, warn or error (default info)
  SWITCHYARD_TASK_RETENTION   how long finished tasks stay visible in Redis (default 2m)
  SWITCHYARD_WEB_DIR          the built web UI served at /ui (default web/dist)
  SWITCHYARD_CREDENTIAL_RECIPIENT  the router's public key (age1...): provider API keys are sealed to it

See docs/dispatcher.md and docs/operations.md.
`

func main() { service.Main("dispatcher", usage, run) }

func run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	var opts bootstrap.Options
	switch cmd {
	case "serve", "migrate":
	case "bootstrap":
		// Flags first, so that a bad flag or --help needs no database.
		fs := flag.NewFlagSet("dispatcher bootstrap", flag.ContinueOnError)
		fs.StringVar(&opts.KeyFile, "key-file", ".run/admin.key", "where the admin API key is written")
		fs.StringVar(&opts.OperatorKeyFile, "operator-key-file", "", "where a platform operator key is written, e.g. .run/operator.key (empty: none)")
		fs.StringVar(&opts.SkillsDir, "skills", "skills", "skill catalogue directory (empty: skip)")
		fs.StringVar(&opts.WorkflowsDir, "workflows", "", "workflow directory, e.g. workflows: each file registered as a chain skill (empty: skip)")
		fs.StringVar(&opts.ToolsDir, "tools", "", "tool catalogue directory, e.g. tools (empty: skip)")
		fs.StringVar(&opts.SimURL, "sim-url", "http://127.0.0.1:8099/v1", "sim-llm base URL (empty: no provider)")
		fs.StringVar(&opts.OrgSlug, "org", "dev", "organisation slug")
		fs.StringVar(&opts.Jurisdiction, "jurisdiction", "eu", "organisation jurisdiction: eu, us or other")
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return service.UsageError{Err: err}
		}
	default:
		return service.Usagef("unknown command %q (want serve, migrate or bootstrap)", cmd)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	log, pool, err := service.Open(ctx, "dispatcher", cfg.LogLevel, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch cmd {
	case "migrate":
		return service.Migrate(ctx, pool, log)
	case "bootstrap":
		res, err := bootstrap.Run(ctx, pool, opts, log)
		if err != nil {
			return err
		}
		fmt.Printf("organisation %s (%s)\nadmin key in %s\n", opts.OrgSlug, res.OrgID, opts.KeyFile)
		if opts.OperatorKeyFile != "" {
			fmt.Printf("operator key in %s\n", opts.OperatorKeyFile)
		}
		for _, name := range res.Tools {
			fmt.Printf("tool  %-24s installed\n", name)
		}
		for jobType, action := range res.Skills {
			fmt.Printf("skill %-24s %s\n", jobType, action)
		}
		return nil
	}
	return serve(ctx, cfg, pool, log)
}

func serve(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) error {
	rdb, err := redisconn.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	asynqOpt, err := redisconn.Asynq(cfg.RedisURL)
	if err != nil {
		return err
	}
	var sealer *providerstore.Sealer
	if cfg.CredentialRecipient != "" {
		if sealer, err = providerstore.NewSealer(cfg.CredentialRecipient); err != nil {
			return err
		}
	} else {
		log.Warn("no router public key: provider API keys cannot be set through the admin API",
			"see", "SWITCHYARD_CREDENTIAL_RECIPIENT")
	}
	a := app.New(app.Options{DB: pool, Redis: rdb, Asynq: asynqOpt, Log: log, TaskRetention: cfg.TaskRetention,
		ReconcileEvery: cfg.ReconcileEvery, ReconcileGrace: cfg.ReconcileGrace,
		CoordinatorConcurrency: cfg.CoordinatorConcurrency, CoordinatorStarts: cfg.CoordinatorStarts, Sealer: sealer})
	a.Start(ctx)
	// Shutdown order: stop accepting requests and let in-flight ones finish, then stop the
	// background loops and close the clients.
	defer a.Stop()

	httpSrv := &http.Server{Addr: cfg.Addr, Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.ListenAndServe() }()
	log.Info("dispatcher listening", "addr", cfg.Addr)
	select {
	case err := <-errc:
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	case <-ctx.Done():
	}
	log.Info("dispatcher draining")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
