// Package config reads an executor's settings from the environment, fills defaults and
// validates them at start-up with errors that name the variable.
package config

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is an executor's configuration.
type Config struct {
	// Class is the queue class served: cpu (executor) or gpu (executor-gpu).
	Class string
	// DatabaseURL is SWITCHYARD_DATABASE_URL; required.
	DatabaseURL string
	// RedisURL is SWITCHYARD_REDIS_URL; required.
	RedisURL string
	// Addr is SWITCHYARD_EXECUTOR_ADDR for /healthz and /metrics; default 127.0.0.1:8081
	// (executor-gpu: 127.0.0.1:8082).
	Addr string
	// RouterURL is SWITCHYARD_ROUTER_URL; default http://127.0.0.1:8090.
	RouterURL string
	// RouterCAFile, RouterCertFile and RouterKeyFile are SWITCHYARD_ROUTER_CA_FILE,
	// SWITCHYARD_ROUTER_CERT_FILE and SWITCHYARD_ROUTER_KEY_FILE: the CA that signed the
	// router's certificate and this executor's client certificate and key, for the
	// router's mutual TLS. All three or none (plain HTTP to a loopback router).
	RouterCAFile, RouterCertFile, RouterKeyFile string
	// ServiceKeyFile is SWITCHYARD_SERVICE_KEY_FILE, the file holding the router's service
	// key; required.
	ServiceKeyFile string
	// Queues is SWITCHYARD_QUEUES, a comma-separated list restricting the queues served;
	// default every queue of the class.
	Queues []string
	// TaskCheckInterval is SWITCHYARD_TASK_CHECK_INTERVAL; default 5ms: how long asynq sleeps
	// after a look that found nothing (docs/PERFORMANCE.md).
	TaskCheckInterval time.Duration
	// IdleWait is SWITCHYARD_IDLE_WAIT; default 1s: the longest an idle queue waits for a
	// push notification before it looks anyway; 0 turns push wake-ups off (poll only).
	IdleWait time.Duration
	// ShardSize is SWITCHYARD_QUEUE_SHARD_SIZE, the most handlers one asynq server runs: a
	// queue of higher concurrency is served by several servers that split it; default 250
	// (see internal/worker).
	ShardSize int
	// ShutdownGrace is SWITCHYARD_SHUTDOWN_GRACE, how long in-flight jobs may run after
	// SIGTERM before they go back to their queue; default 30s.
	ShutdownGrace time.Duration
	// LogLevel is SWITCHYARD_LOG_LEVEL; default info.
	LogLevel string
	// CapacityWait is SWITCHYARD_CAPACITY_WAIT; default 10s: how long an LLM call may hold
	// its worker waiting in the router for rate-limit capacity before its run is parked
	// (queued again, holding no worker, until the router's return slot); 0: never park.
	CapacityWait time.Duration
	// MaxQueueTime is SWITCHYARD_MAX_QUEUE_TIME; default 1h: the longest a run may wait for
	// provider capacity for one call before it ends timed_out (RATE_LIMIT_QUEUE_TIMEOUT).
	MaxQueueTime time.Duration
	// ToolAllowPrivate is SWITCHYARD_TOOL_ALLOW_PRIVATE, a comma-separated netguard
	// allowlist (host, host:port, *.domain, address or CIDR) of private destinations every
	// tool call may reach, the built-in http_request tool included; default none.
	ToolAllowPrivate []string
}

// FromEnv reads the configuration for a class.
func FromEnv(class string) (Config, error) {
	defAddr := "127.0.0.1:8081"
	if class == "gpu" {
		defAddr = "127.0.0.1:8082"
	}
	c := Config{
		Class:          class,
		DatabaseURL:    os.Getenv("SWITCHYARD_DATABASE_URL"),
		RedisURL:       os.Getenv("SWITCHYARD_REDIS_URL"),
		Addr:           cmp.Or(os.Getenv("SWITCHYARD_EXECUTOR_ADDR"), defAddr),
		RouterURL:      cmp.Or(os.Getenv("SWITCHYARD_ROUTER_URL"), "http://127.0.0.1:8090"),
		ServiceKeyFile: os.Getenv("SWITCHYARD_SERVICE_KEY_FILE"),
		RouterCAFile:   os.Getenv("SWITCHYARD_ROUTER_CA_FILE"),
		RouterCertFile: os.Getenv("SWITCHYARD_ROUTER_CERT_FILE"),
		RouterKeyFile:  os.Getenv("SWITCHYARD_ROUTER_KEY_FILE"),
		LogLevel:       cmp.Or(os.Getenv("SWITCHYARD_LOG_LEVEL"), "info"),
	}
	if q := os.Getenv("SWITCHYARD_QUEUES"); q != "" {
		for _, name := range strings.Split(q, ",") {
			if name = strings.TrimSpace(name); name != "" {
				c.Queues = append(c.Queues, name)
			}
		}
	}
	c.ToolAllowPrivate = list(os.Getenv("SWITCHYARD_TOOL_ALLOW_PRIVATE"))
	var err error
	if c.TaskCheckInterval, err = duration("SWITCHYARD_TASK_CHECK_INTERVAL", "5ms"); err != nil {
		return c, err
	}
	if os.Getenv("SWITCHYARD_IDLE_WAIT") == "0" {
		c.IdleWait = -1 // worker.Options: negative is off
	} else if c.IdleWait, err = duration("SWITCHYARD_IDLE_WAIT", "1s"); err != nil {
		return c, err
	}
	if v := os.Getenv("SWITCHYARD_QUEUE_SHARD_SIZE"); v != "" {
		if c.ShardSize, err = strconv.Atoi(v); err != nil || c.ShardSize < 1 {
			return c, fmt.Errorf("SWITCHYARD_QUEUE_SHARD_SIZE: %q is not a positive whole number", v)
		}
	}
	if c.ShutdownGrace, err = duration("SWITCHYARD_SHUTDOWN_GRACE", "30s"); err != nil {
		return c, err
	}
	if v := os.Getenv("SWITCHYARD_CAPACITY_WAIT"); v == "0" {
		c.CapacityWait = -1 // runner.Runner: negative never parks
	} else if c.CapacityWait, err = duration("SWITCHYARD_CAPACITY_WAIT", "10s"); err != nil {
		return c, err
	}
	if c.MaxQueueTime, err = duration("SWITCHYARD_MAX_QUEUE_TIME", "1h"); err != nil {
		return c, err
	}
	switch {
	case c.DatabaseURL == "":
		return c, fmt.Errorf("SWITCHYARD_DATABASE_URL is required")
	case c.RedisURL == "":
		return c, fmt.Errorf("SWITCHYARD_REDIS_URL is required")
	case c.ServiceKeyFile == "":
		return c, fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE is required (the file holding the router's service key)")
	case (c.RouterCAFile != "" || c.RouterCertFile != "" || c.RouterKeyFile != "") &&
		(c.RouterCAFile == "" || c.RouterCertFile == "" || c.RouterKeyFile == ""):
		return c, fmt.Errorf("SWITCHYARD_ROUTER_CA_FILE, SWITCHYARD_ROUTER_CERT_FILE and SWITCHYARD_ROUTER_KEY_FILE must be set together (mutual TLS to the router)")
	}
	return c, nil
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func duration(name, def string) (time.Duration, error) {
	v := cmp.Or(os.Getenv(name), def)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration like %s", name, v, def)
	}
	return d, nil
}
