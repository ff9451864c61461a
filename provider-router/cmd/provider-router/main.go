// Command provider-router is the only holder of provider credentials: it routes each LLM
// call of an executor to the organisation's provider and governs rate, tokens and money
// before a provider sees the request.
//
//	provider-router serve     serve /internal/ai/chat (default)
//	provider-router migrate   apply database migrations and exit
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/migrations"
	"github.com/switchyard-ai/switchyard/provider-router/internal/config"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/server"
	"github.com/switchyard-ai/switchyard/shared/logging"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "provider-router:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	log, err := logging.New(os.Stderr, "provider-router", cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("SWITCHYARD_LOG_LEVEL: %w", err)
	}
	pool, err := postgres.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch cmd {
	case "migrate":
		v, err := migrations.Apply(ctx, pool)
		if err == nil {
			log.Info("migrations applied", "version", v)
		}
		return err
	case "serve":
	default:
		return fmt.Errorf("unknown command %q (want serve or migrate)", cmd)
	}
	key, err := os.ReadFile(cfg.ServiceKeyFile)
	if err != nil {
		return fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE: %w", err)
	}
	if strings.TrimSpace(string(key)) == "" {
		return fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE: %s is empty", cfg.ServiceKeyFile)
	}

	usage := ledger.NewWriter(pool, log, 10000)
	usage.Start()
	srv := &server.Server{
		DB: pool, ServiceKey: strings.TrimSpace(string(key)), AllowedCallers: cfg.AllowedCallers,
		Routes: &routing.Resolver{DB: pool}, Prices: &pricing.Table{DB: pool}, Ledger: usage, Log: log,
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}},
	}
	httpSrv := &http.Server{Addr: cfg.Addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.ListenAndServe() }()
	log.Info("provider router listening", "addr", cfg.Addr, "callers", cfg.AllowedCallers)
	select {
	case err = <-errc:
		err = fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	case <-ctx.Done():
	}
	// Shutdown order: stop accepting calls, let in-flight ones finish, then flush the ledger.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := httpSrv.Shutdown(shutdownCtx); serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	usage.Stop()
	return err
}
