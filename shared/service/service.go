// Package service is the start-up every Switchyard binary shares: a context that SIGINT and
// SIGTERM cancel, the exit code and message on failure, the JSON logger, the Postgres pool and
// the `migrate` step.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only when SWITCHYARD_PPROF_ADDR is set (Profile)
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/migrations"
	"github.com/switchyard-ai/switchyard/shared/logging"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Main runs fn with the command-line arguments and a context cancelled by SIGINT or SIGTERM,
// and exits with its status: 0 on success; 1 with "<name>: <error>" when fn fails; 2, and a
// pointer to --help, when the error is a UsageError. -h, -help, --help or help as the first
// argument print usage on stdout and exit 0 without calling fn; an error wrapping
// flag.ErrHelp (a subcommand's flag set asked for -h, and has printed its flags) exits 0.
func Main(name, usage string, fn func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, name, usage, os.Args[1:], os.Stdout, os.Stderr, fn)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, name, usage string, args []string, stdout, stderr io.Writer,
	fn func(ctx context.Context, args []string) error) int {
	if len(args) > 0 && IsHelp(args[0]) {
		fmt.Fprint(stdout, strings.TrimLeft(usage, "\n"))
		return 0
	}
	err := fn(ctx, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, name+":", err)
	var ue UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return 2
	}
	return 1
}

// IsHelp reports whether arg asks for help: -h, -help, --help or help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// UsageError is a mistake in how a binary was called (an unknown command, a missing flag):
// Main exits 2 and points at --help.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

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
