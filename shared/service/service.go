// Package service is the start-up every Switchyard binary shares: a context that SIGINT and
// SIGTERM cancel, the exit code and message on failure, the JSON logger, the Postgres pool and
// the `migrate` step.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only when SWITCHYARD_PPROF_ADDR is set (Profile)
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/migrations"
	"github.com/switchyard-ai/switchyard/shared/logging"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Main runs fn with the command-line arguments and a context cancelled by SIGINT or SIGTERM,
// and exits 1 with "<name>: <error>" when it fails.
func Main(name string, fn func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := fn(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Open returns the logger (JSON on stderr, tagged with the service name) and the Postgres
// pool a binary works with, and starts the profiler when SWITCHYARD_PPROF_ADDR is set.
// Close the pool when done.
func Open(ctx context.Context, name, logLevel, databaseURL string) (*slog.Logger, *pgxpool.Pool, error) {
	log, err := logging.New(os.Stderr, name, logLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("SWITCHYARD_LOG_LEVEL: %w", err)
	}
	pool, err := postgres.Connect(ctx, databaseURL)
	if err != nil {
		return nil, nil, err
	}
	Profile(log, os.Getenv("SWITCHYARD_PPROF_ADDR"))
	return log, pool, nil
}

// Profile serves Go's profiler (net/http/pprof) on addr when addr is set: every binary
// reads it from SWITCHYARD_PPROF_ADDR through Open. Keep it on loopback; it is off by
// default. The profiler registers on http.DefaultServeMux, which serves nothing else.
func Profile(log *slog.Logger, addr string) {
	if addr == "" {
		return
	}
	go func() {
		log.Info("profiler listening", "addr", addr)
		if err := http.ListenAndServe(addr, nil); err != nil {
			log.Warn("profiler stopped", "error", err)
		}
	}()
}

// Migrate applies the schema migrations and logs the version reached.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	v, err := migrations.Apply(ctx, pool)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "version", v)
	return nil
}
