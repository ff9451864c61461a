// Package config reads the dispatcher's settings from the environment, fills defaults and
// validates them at start-up with errors that name the variable.
package config

import (
	"cmp"
	"fmt"
	"os"
	"time"
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
}

// FromEnv reads the configuration.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:   os.Getenv("SWITCHYARD_DATABASE_URL"),
		RedisURL:      os.Getenv("SWITCHYARD_REDIS_URL"),
		Addr:          cmp.Or(os.Getenv("SWITCHYARD_DISPATCHER_ADDR"), "127.0.0.1:8080"),
		LogLevel:      cmp.Or(os.Getenv("SWITCHYARD_LOG_LEVEL"), "info"),
		ShutdownGrace: 10 * time.Second,
	}
	retention := cmp.Or(os.Getenv("SWITCHYARD_TASK_RETENTION"), "2m")
	d, err := time.ParseDuration(retention)
	if err != nil || d < 0 {
		return c, fmt.Errorf("SWITCHYARD_TASK_RETENTION: %q is not a duration like 2m", retention)
	}
	c.TaskRetention = d
	if c.DatabaseURL == "" {
		return c, fmt.Errorf("SWITCHYARD_DATABASE_URL is required (e.g. postgres://postgres@127.0.0.1:25432/switchyard)")
	}
	if c.RedisURL == "" {
		return c, fmt.Errorf("SWITCHYARD_REDIS_URL is required (e.g. redis://127.0.0.1:26379/0)")
	}
	return c, nil
}
