// Package config reads the provider router's settings from the environment, fills defaults
// and validates them at start-up with errors that name the variable.
package config

import (
	"cmp"
	"fmt"
	"os"
	"strings"
)

// Config is the router's configuration.
type Config struct {
	// DatabaseURL is SWITCHYARD_DATABASE_URL; required.
	DatabaseURL string
	// RedisURL is SWITCHYARD_REDIS_URL; required.
	RedisURL string
	// Addr is SWITCHYARD_ROUTER_ADDR; default 127.0.0.1:8090 (never a public address by default).
	Addr string
	// ServiceKeyFile is SWITCHYARD_SERVICE_KEY_FILE, the file holding the service key callers
	// must present in X-Service-Key; required.
	ServiceKeyFile string
	// AllowedCallers is SWITCHYARD_ROUTER_CALLERS, the X-Caller-Service values admitted;
	// default "executor".
	AllowedCallers []string
	// LogLevel is SWITCHYARD_LOG_LEVEL; default info.
	LogLevel string
}

// FromEnv reads the configuration.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:    os.Getenv("SWITCHYARD_DATABASE_URL"),
		RedisURL:       os.Getenv("SWITCHYARD_REDIS_URL"),
		Addr:           cmp.Or(os.Getenv("SWITCHYARD_ROUTER_ADDR"), "127.0.0.1:8090"),
		ServiceKeyFile: os.Getenv("SWITCHYARD_SERVICE_KEY_FILE"),
		LogLevel:       cmp.Or(os.Getenv("SWITCHYARD_LOG_LEVEL"), "info"),
	}
	for _, s := range strings.Split(cmp.Or(os.Getenv("SWITCHYARD_ROUTER_CALLERS"), "executor"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.AllowedCallers = append(c.AllowedCallers, s)
		}
	}
	switch {
	case c.DatabaseURL == "":
		return c, fmt.Errorf("SWITCHYARD_DATABASE_URL is required")
	case c.RedisURL == "":
		return c, fmt.Errorf("SWITCHYARD_REDIS_URL is required")
	case c.ServiceKeyFile == "":
		return c, fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE is required (the file holding the service key)")
	}
	return c, nil
}
