// Package config reads the dispatcher's settings from the environment, fills defaults and
// validates them at start-up with errors that name the variable.
package config

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/shared/providerstore"
)

// Config is the dispatcher's configuration.
type Config struct {
	// DatabaseURL is SWITCHYARD_DATABASE_URL; required.
	DatabaseURL string
	// RedisURL is SWITCHYARD_REDIS_URL; required.
	RedisURL string
	// Addr is SWITCHYARD_DISPATCHER_ADDR; default 127.0.0.1:8080.
	Addr string
	// LogLevel is SWITCHYARD_LOG_LEVEL; default info.
	LogLevel string
	// TaskRetention is SWITCHYARD_TASK_RETENTION, how long finished tasks stay visible in
	// Redis; default 2m.
	TaskRetention time.Duration
	// ShutdownGrace is how long in-flight requests may take after SIGTERM; default 10s.
	ShutdownGrace time.Duration
	// ReconcileEvery and ReconcileGrace are SWITCHYARD_RECONCILE_EVERY (default 5s) and
	// SWITCHYARD_RECONCILE_GRACE (default 10s): how often the reconciler scans, and how long
	// a run or chain must have been left alone before it repairs it.
	ReconcileEvery, ReconcileGrace time.Duration
	// CoordinatorConcurrency is SWITCHYARD_COORDINATOR_CONCURRENCY, how many chain
	// transitions run at once; default 32.
	CoordinatorConcurrency int
	// CoordinatorStarts is SWITCHYARD_COORDINATOR_STARTS, how many chains start at once;
	// default 2.
	CoordinatorStarts int
	// CredentialRecipient is SWITCHYARD_CREDENTIAL_RECIPIENT (or the content of the file
	// SWITCHYARD_CREDENTIAL_RECIPIENT_FILE), the router's public key ("age1..."): provider
	// API keys set through the admin API are sealed to it, so the dispatcher can store a
	// credential but never read one. Unset: setting a key answers CREDENTIAL_UNAVAILABLE.
	// It is not a secret.
	CredentialRecipient string
}

// FromEnv reads the configuration.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:         os.Getenv("SWITCHYARD_DATABASE_URL"),
		RedisURL:            os.Getenv("SWITCHYARD_REDIS_URL"),
		Addr:                cmp.Or(os.Getenv("SWITCHYARD_DISPATCHER_ADDR"), "127.0.0.1:8080"),
		LogLevel:            cmp.Or(os.Getenv("SWITCHYARD_LOG_LEVEL"), "info"),
		ShutdownGrace:       10 * time.Second,
		CredentialRecipient: strings.TrimSpace(os.Getenv("SWITCHYARD_CREDENTIAL_RECIPIENT")),
	}
	retention := cmp.Or(os.Getenv("SWITCHYARD_TASK_RETENTION"), "2m")
	d, err := time.ParseDuration(retention)
	if err != nil || d < 0 {
		return c, fmt.Errorf("SWITCHYARD_TASK_RETENTION: %q is not a duration like 2m", retention)
	}
	c.TaskRetention = d
	for _, e := range []struct {
		name, def string
		dst       *time.Duration
	}{{"SWITCHYARD_RECONCILE_EVERY", "5s", &c.ReconcileEvery}, {"SWITCHYARD_RECONCILE_GRACE", "10s", &c.ReconcileGrace}} {
		v := cmp.Or(os.Getenv(e.name), e.def)
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s: %q is not a positive duration like %s", e.name, v, e.def)
		}
		*e.dst = d
	}
	n, err := strconv.Atoi(cmp.Or(os.Getenv("SWITCHYARD_COORDINATOR_CONCURRENCY"), "32"))
	if err != nil || n < 1 || n > 1000 {
		return c, fmt.Errorf("SWITCHYARD_COORDINATOR_CONCURRENCY: want a number from 1 to 1000")
	}
	c.CoordinatorConcurrency = n
	n, err = strconv.Atoi(cmp.Or(os.Getenv("SWITCHYARD_COORDINATOR_STARTS"), "2"))
	if err != nil || n < 1 || n > 1000 {
		return c, fmt.Errorf("SWITCHYARD_COORDINATOR_STARTS: want a number from 1 to 1000")
	}
	c.CoordinatorStarts = n
	if f := os.Getenv("SWITCHYARD_CREDENTIAL_RECIPIENT_FILE"); f != "" && c.CredentialRecipient == "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return c, fmt.Errorf("SWITCHYARD_CREDENTIAL_RECIPIENT_FILE: %w", err)
		}
		c.CredentialRecipient = strings.TrimSpace(string(b))
	}
	if c.CredentialRecipient != "" {
		if _, err := providerstore.NewSealer(c.CredentialRecipient); err != nil {
			return c, fmt.Errorf("SWITCHYARD_CREDENTIAL_RECIPIENT: %w", err)
		}
	}
	if c.DatabaseURL == "" {
		return c, fmt.Errorf("SWITCHYARD_DATABASE_URL is required (e.g. postgres://postgres@127.0.0.1:25432/switchyard)")
	}
	if c.RedisURL == "" {
		return c, fmt.Errorf("SWITCHYARD_REDIS_URL is required (e.g. redis://127.0.0.1:26379/0)")
	}
	return c, nil
}
