// Command provider-router is the only holder of provider credentials: it routes each LLM
// call of an executor to the organisation's provider and governs rate, tokens and money
// before a provider sees the request.
//
//	provider-router serve                 serve /internal/ai/chat (default)
//	provider-router migrate               apply database migrations and exit
//	provider-router certs --dir DIR [--router-dir DIR] [--executor-dir DIR]
//	                                      create (once) a development CA and the router's and executor's certificates
//	provider-router credentials keygen --file PATH [--id ID] [--rotate]
//	                                      create a key ring file, or add a new current key to it
//	provider-router credentials set --org SLUG --provider NAME --key-file PATH|-
//	                                      encrypt and store a provider's API key (read from a file or stdin, never argv)
//	provider-router credentials rotate    re-encrypt every credential under the current key
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/config"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/registry"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/server"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/service"
)

const usage = `Usage: provider-router [command]

The only holder of provider credentials: routes each LLM call of an executor to the
organisation's provider and governs rate, tokens and money before a provider sees it.

Commands:
  serve                 serve /internal/ai/chat behind its three locks (default)
  migrate               apply database migrations and exit
  certs --dir DIR [--router-dir DIR] [--executor-dir DIR]
                        create (once) a development CA and the router's and executor's
                        certificates
  credentials keygen --file PATH [--id ID] [--rotate]
                        create a key ring file, or add a new current key to it
  credentials set --org SLUG --provider NAME --key-file PATH|-
                        encrypt and store a provider's API key (from a file or stdin)
  credentials identity --file PATH [--public-file PATH] [--rotate]
                        create the router's age identity (kept if it exists) and write its
                        public key, the one to give the dispatcher (SWITCHYARD_CREDENTIAL_RECIPIENT)
  credentials rotate    re-seal every credential to the current public key (with an identity;
                        this migrates key-ring credentials), else under the ring's current key
  help                  print this help

Environment:
  SWITCHYARD_DATABASE_URL      Postgres (required)
  SWITCHYARD_REDIS_URL         Redis (required to serve)
  SWITCHYARD_SERVICE_KEY_FILE  file holding the service key callers present (required to serve)
  SWITCHYARD_ROUTER_ADDR       listen address (default 127.0.0.1:8090)
  SWITCHYARD_ROUTER_TLS_CERT, SWITCHYARD_ROUTER_TLS_KEY, SWITCHYARD_ROUTER_CLIENT_CA
                               mutual TLS: all three, or none on a loopback address
  SWITCHYARD_ROUTER_IDENTITY_FILE  the age identity that opens credentials sealed by the dispatcher
  SWITCHYARD_ROUTER_KEYS_FILE  credential key ring of older credentials (or SWITCHYARD_ROUTER_KEYS, inline JSON)
  SWITCHYARD_LOG_LEVEL         debug, info, warn or error (default info)

See docs/router.md for the rest.
`

func main() { service.Main("provider-router", usage, run) }

func run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	var set credentialSet
	switch cmd {
	case "certs":
		return certs(args)
	case "credentials":
		sub := ""
		if len(args) > 0 {
			sub = args[0]
		}
		switch sub {
		case "keygen":
			return keygen(args[1:])
		case "identity":
			return identity(args[1:])
		case "set":
			// Flags first, so that a bad flag or --help needs no database.
			var err error
			if set, err = parseCredentialSet(args[1:]); err != nil {
				return err
			}
		case "rotate":
		default:
			return service.Usagef("credentials: want identity, keygen, set or rotate, not %q", sub)
		}
	case "serve", "migrate":
	default:
		return service.Usagef("unknown command %q (want serve, migrate, certs or credentials)", cmd)
	}
	cfg, err := config.FromEnv(cmd == "serve")
	if err != nil {
		return err
	}
	log, pool, err := service.Open(ctx, "provider-router", cfg.LogLevel, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch cmd {
	case "migrate":
		return service.Migrate(ctx, pool, log)
	case "credentials":
		ring, err := credential.LoadKeyRing(cfg.KeysFile, cfg.Keys)
		if err != nil {
			return err
		}
		ids, err := credential.LoadIdentities(cfg.IdentityFile)
		if err != nil {
			return err
		}
		return credentials(ctx, &credential.Store{DB: pool, Ring: ring, Identities: ids}, args[0], set, os.Stdin, log)
	}
	return serve(ctx, cfg, log, pool)
}

func certs(args []string) error {
	fs := flag.NewFlagSet("provider-router certs", flag.ContinueOnError)
	var l mtls.Layout
	fs.StringVar(&l.CA, "dir", ".run/tls", "directory for the CA (ca.pem, ca-key.pem) and, unless moved by the next two flags, every certificate")
	fs.StringVar(&l.Router, "router-dir", "", "directory for the router's router.pem, router-key.pem and a copy of ca.pem (default --dir)")
	fs.StringVar(&l.Executor, "executor-dir", "", "directory for the executor's executor.pem, executor-key.pem and a copy of ca.pem (default --dir)")
	if err := flagParse(fs, args); err != nil {
		return err
	}
	res, err := mtls.EnsureDevCAAt(l)
	if err != nil {
		return err
	}
	if len(res.Created) == 0 {
		fmt.Fprintf(os.Stderr, "certs: %s already holds a valid development CA and certificates\n", l.CA)
	} else {
		fmt.Fprintf(os.Stderr, "certs: wrote %s in %s\n", strings.Join(res.Created, ", "), l.CA)
	}
	return nil
}

func keygen(args []string) error {
	fs := flag.NewFlagSet("provider-router credentials keygen", flag.ContinueOnError)
	file := fs.String("file", "", "key ring file (JSON) to create or extend")
	id := fs.String("id", time.Now().UTC().Format("k20060102T150405"), "id of the new key")
	rotate := fs.Bool("rotate", false, "add a new current key to an existing file")
	if err := flagParse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return service.Usagef("credentials keygen: --file is required")
	}
	created, err := credential.GenerateKeyFile(*file, *id, *rotate)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(os.Stderr, "credentials: key %s is now current in %s\n", *id, *file)
	} else {
		fmt.Fprintf(os.Stderr, "credentials: %s already holds a key ring (use --rotate to add a key)\n", *file)
	}
	return nil
}

func identity(args []string) error {
	fs := flag.NewFlagSet("provider-router credentials identity", flag.ContinueOnError)
	file := fs.String("file", "", "the router's identity file (0600) to create")
	public := fs.String("public-file", "", "where to write the public key (0644), for the dispatcher")
	rotate := fs.Bool("rotate", false, "put a new current identity first in an existing file (older ones still open)")
	if err := flagParse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return service.Usagef("credentials identity: --file is required")
	}
	created, recipient, err := credential.GenerateIdentityFile(*file, *public, *rotate)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(os.Stderr, "credentials: created the identity in %s; its public key is %s\n", *file, recipient)
	} else {
		fmt.Fprintf(os.Stderr, "credentials: %s already holds an identity (public key %s; --rotate adds one)\n", *file, recipient)
	}
	return nil
}

// credentialSet is the parsed command line of `credentials set`.
type credentialSet struct{ org, provider, keyFile string }

func parseCredentialSet(args []string) (credentialSet, error) {
	var c credentialSet
	fs := flag.NewFlagSet("provider-router credentials set", flag.ContinueOnError)
	fs.StringVar(&c.org, "org", "", "organisation slug")
	fs.StringVar(&c.provider, "provider", "", "provider config name")
	fs.StringVar(&c.keyFile, "key-file", "", "file holding the API key, or - for stdin")
	if err := flagParse(fs, args); err != nil {
		return c, err
	}
	if c.org == "" || c.provider == "" || c.keyFile == "" {
		return c, service.Usagef("credentials set: --org, --provider and --key-file are required")
	}
	return c, nil
}

// flagParse parses a subcommand's flags: -h is flag.ErrHelp (exit 0), anything else wrong
// is a usage error.
func flagParse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return service.UsageError{Err: err}
}

func credentials(ctx context.Context, store *credential.Store, sub string, set credentialSet, stdin io.Reader, log *slog.Logger) error {
	if sub == "rotate" {
		n, err := store.Rotate(ctx)
		if err != nil {
			return err
		}
		log.Info("credentials re-sealed", "count", n)
		return nil
	}
	var raw []byte
	var err error
	if set.keyFile == "-" {
		raw, err = io.ReadAll(bufio.NewReader(io.LimitReader(stdin, 64<<10)))
	} else {
		raw, err = os.ReadFile(set.keyFile)
	}
	if err != nil {
		return fmt.Errorf("reading the key: %w", err)
	}
	secret := credential.Secret(strings.TrimSpace(string(raw)))
	clear(raw)
	if secret == "" {
		return errors.New("credentials set: the key is empty")
	}
	if err := store.Set(ctx, set.org, set.provider, secret); err != nil {
		return err
	}
	log.Info("credential stored", "org", set.org, "provider", set.provider)
	return nil
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger, pool *pgxpool.Pool) error {
	key, err := os.ReadFile(cfg.ServiceKeyFile)
	if err != nil {
		return fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE: %w", err)
	}
	if strings.TrimSpace(string(key)) == "" {
		return fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE: %s is empty", cfg.ServiceKeyFile)
	}
	ring, err := credential.LoadKeyRing(cfg.KeysFile, cfg.Keys)
	if err != nil {
		return err
	}
	ids, err := credential.LoadIdentities(cfg.IdentityFile)
	if err != nil {
		return err
	}
	if ids == nil {
		log.Warn("no credential identity configured: credentials set through the admin API cannot be opened",
			"see", "SWITCHYARD_ROUTER_IDENTITY_FILE")
	} else {
		log.Info("credential identity loaded", "public_key", ids.Recipient())
	}
	rdb, err := redisconn.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()

	metrics, err := pipeline.NewMetrics()
	if err != nil {
		return err
	}
	lim, err := limiter.New(rdb, limiter.Options{Source: registry.Limits(pool), Metrics: metrics.LimiterMetrics(), Logger: log,
		Allowance: limiter.Allowance{Requests: cfg.ShareRequests}})
	if err != nil {
		return err
	}
	if err := lim.Start(ctx); err != nil {
		return err
	}
	defer lim.Stop()
	est, err := estimate.New(rdb, estimate.Options{})
	if err != nil {
		return err
	}
	est.Start(ctx, 0, log)
	defer func() {
		if err := est.Stop(context.WithoutCancel(ctx)); err != nil {
			log.Warn("writing the last token statistics", "error", err)
		}
	}()
	usage := ledger.New(pool, rdb, log, ledger.Options{ClaimIdle: cfg.LedgerClaimIdle, Metrics: metrics.LedgerMetrics()})
	if err := usage.Start(ctx); err != nil {
		return err
	}
	steps := handoff.New(rdb, log, handoff.Options{AnswerTTL: cfg.AnswerTTL, ClaimTTL: cfg.StepClaimTTL,
		RunStopped: handoff.RunStopped(pool)})
	if err := steps.Start(ctx); err != nil {
		return err
	}
	srv := &server.Server{
		DB: pool, ServiceKey: strings.TrimSpace(string(key)), AllowedCallers: cfg.AllowedCallers,
		Routes: &routing.Resolver{DB: pool}, Prices: &pricing.Table{DB: pool},
		Credentials: &credential.Store{DB: pool, Ring: ring, Identities: ids},
		Limiter:     lim, QueueOrder: pipeline.QueueOrder(cfg.QueueOrder), Estimator: est, Breakers: pipeline.NewBreakers(breaker.Options{
			Failures: uint32(cfg.BreakerFailures), OpenFor: cfg.BreakerOpen}, metrics),
		Budget: &budget.Guard{RDB: rdb, Store: budget.PGStore{DB: pool}},
		Ledger: usage, Handoff: steps, Log: log, Metrics: metrics, MaxWait: cfg.MaxWait, DefaultMaxTokens: cfg.DefaultMaxTokens,
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}},
	}
	watcher := &registry.Watcher{DB: pool, Log: log, OnChange: srv.OnRegistryChange, OnReset: srv.OnRegistryReset}
	if err := watcher.Start(ctx); err != nil {
		return err
	}
	defer watcher.Stop()

	httpSrv := &http.Server{Addr: cfg.Addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if cfg.TLS() {
		if httpSrv.TLSConfig, err = mtls.ServerConfig(cfg.TLSCert, cfg.TLSKey); err != nil {
			return fmt.Errorf("SWITCHYARD_ROUTER_TLS_CERT: %w", err)
		}
		roots, err := mtls.LoadPool(cfg.ClientCA)
		if err != nil {
			return fmt.Errorf("SWITCHYARD_ROUTER_CLIENT_CA: %w", err)
		}
		srv.MTLS = mtls.NewVerifier(roots, cfg.ClientNames)
	} else {
		log.Warn("serving plain HTTP without mutual TLS on a loopback address: development only",
			"addr", cfg.Addr, "see", "SWITCHYARD_ROUTER_TLS_CERT")
	}
	errc := make(chan error, 1)
	go func() {
		if cfg.TLS() {
			errc <- httpSrv.ListenAndServeTLS("", "")
		} else {
			errc <- httpSrv.ListenAndServe()
		}
	}()
	log.Info("provider router listening", "addr", cfg.Addr, "mtls", cfg.TLS(), "client_names", cfg.ClientNames,
		"callers", cfg.AllowedCallers)
	select {
	case err = <-errc:
		err = fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	case <-ctx.Done():
	}
	// Shutdown order: stop accepting calls, let in-flight ones finish (each recorded its
	// usage entry before answering) and their bookkeeping run, then stop the ledger's mover
	// (what it has not moved stays in Redis for the other replicas or the next start) and
	// store any entries held in memory; the deferred stops follow (watcher, limiter, Redis).
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := httpSrv.Shutdown(shutdownCtx); serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	srv.Wait()
	usage.Stop(shutdownCtx)
	return err
}
