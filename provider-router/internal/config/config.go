// Package config reads the provider router's settings from the environment, fills defaults
// and validates them at start-up with errors that name the variable.
package config

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the router's configuration.
type Config struct {
	// DatabaseURL is SWITCHYARD_DATABASE_URL; required.
	DatabaseURL string
	// RedisURL is SWITCHYARD_REDIS_URL; required to serve.
	RedisURL string
	// Addr is SWITCHYARD_ROUTER_ADDR; default 127.0.0.1:8090 (never a public address by default).
	Addr string
	// ServiceKeyFile is SWITCHYARD_SERVICE_KEY_FILE, the file holding the service key callers
	// must present in X-Service-Key; required to serve.
	ServiceKeyFile string
	// AllowedCallers is SWITCHYARD_ROUTER_CALLERS, the X-Caller-Service values admitted;
	// default "executor".
	AllowedCallers []string
	// TLSCert and TLSKey are SWITCHYARD_ROUTER_TLS_CERT / _KEY, the router's server
	// certificate and key (PEM). With ClientCA they switch on mutual TLS.
	TLSCert, TLSKey string
	// ClientCA is SWITCHYARD_ROUTER_CLIENT_CA, the CA (PEM) that must have signed callers'
	// client certificates.
	ClientCA string
	// ClientNames is SWITCHYARD_ROUTER_CLIENT_NAMES, the client certificate identities (CN
	// or URI SAN) admitted; default "executor".
	ClientNames []string
	// KeysFile is SWITCHYARD_ROUTER_KEYS_FILE, the credential key ring (JSON); Keys is
	// SWITCHYARD_ROUTER_KEYS, the same JSON inline. Neither: no provider credentials.
	KeysFile, Keys string
	// IdentityFile is SWITCHYARD_ROUTER_IDENTITY_FILE, the router's age identity: the
	// private key that opens credentials the dispatcher sealed to its public key. Unset:
	// only key-ring credentials (and providers without a key) can be used.
	IdentityFile string
	// MaxWait is SWITCHYARD_ROUTER_MAX_WAIT, the longest a call without X-Deadline waits for
	// rate-limit capacity; default 2m.
	MaxWait time.Duration
	// DefaultMaxTokens is SWITCHYARD_ROUTER_DEFAULT_MAX_TOKENS, the completion cap set on a
	// call under a cost ceiling that sets none; default 4096.
	DefaultMaxTokens int
	// ShareRequests is SWITCHYARD_ROUTER_SHARE_REQUESTS, the most requests a replica takes
	// from a bucket at once to admit calls locally while the bucket has plenty of headroom
	// (docs/rate-limits.md, "Local admission"); 0 turns local admission off; default 64.
	ShareRequests int
	// AnswerTTL is SWITCHYARD_ROUTER_ANSWER_TTL, how long the answer of a call naming its
	// (job, step) pair is kept for a repeated call of the pair; default 24h.
	AnswerTTL time.Duration
	// StepClaimTTL is SWITCHYARD_ROUTER_STEP_CLAIM_TTL, how long a (job, step) pair stays
	// claimed by a replica that died mid-call before a waiting call takes it over; default 30s.
	StepClaimTTL time.Duration
	// LedgerClaimIdle is SWITCHYARD_ROUTER_LEDGER_CLAIM_IDLE, how long a usage entry one
	// replica read stays unwritten before another replica takes it over; default 30s.
	LedgerClaimIdle time.Duration
	// BreakerFailures is SWITCHYARD_ROUTER_BREAKER_FAILURES, how many consecutive failures
	// of a provider endpoint open its circuit; default 5. BreakerOpen is
	// SWITCHYARD_ROUTER_BREAKER_OPEN, how long an open circuit refuses calls (the executor
	// parks their runs meanwhile) before a probe; default 30s.
	BreakerFailures int
	BreakerOpen     time.Duration
	// QueueOrder is SWITCHYARD_ROUTER_QUEUE_ORDER, the order of calls waiting for
	// rate-limit capacity among equal priorities: "progress" (default: the run or chain
	// with the fewest calls outstanding first, seed 003) or "fifo" (arrival order; a
	// baseline for measuring the progress order, docs/rate-limits.md) or "remaining"
	// (progress, counting a chain's steps not yet dispatched with its calls outstanding).
	QueueOrder string
	// LogLevel is SWITCHYARD_LOG_LEVEL; default info.
	LogLevel string
}

// TLS reports whether mutual TLS is configured.
func (c Config) TLS() bool { return c.TLSCert != "" }

func list(v, def string) []string {
	var out []string
	for _, s := range strings.Split(cmp.Or(v, def), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// FromEnv reads the configuration; serve says whether the settings only serving needs
// (Redis, the service key, TLS) must be valid too.
func FromEnv(serve bool) (Config, error) {
	c := Config{
		DatabaseURL:    os.Getenv("SWITCHYARD_DATABASE_URL"),
		RedisURL:       os.Getenv("SWITCHYARD_REDIS_URL"),
		Addr:           cmp.Or(os.Getenv("SWITCHYARD_ROUTER_ADDR"), "127.0.0.1:8090"),
		ServiceKeyFile: os.Getenv("SWITCHYARD_SERVICE_KEY_FILE"),
		AllowedCallers: list(os.Getenv("SWITCHYARD_ROUTER_CALLERS"), "executor"),
		TLSCert:        os.Getenv("SWITCHYARD_ROUTER_TLS_CERT"),
		TLSKey:         os.Getenv("SWITCHYARD_ROUTER_TLS_KEY"),
		ClientCA:       os.Getenv("SWITCHYARD_ROUTER_CLIENT_CA"),
		ClientNames:    list(os.Getenv("SWITCHYARD_ROUTER_CLIENT_NAMES"), "executor"),
		KeysFile:       os.Getenv("SWITCHYARD_ROUTER_KEYS_FILE"),
		Keys:           os.Getenv("SWITCHYARD_ROUTER_KEYS"),
		IdentityFile:   os.Getenv("SWITCHYARD_ROUTER_IDENTITY_FILE"),
		LogLevel:       cmp.Or(os.Getenv("SWITCHYARD_LOG_LEVEL"), "info"),
		QueueOrder:     cmp.Or(os.Getenv("SWITCHYARD_ROUTER_QUEUE_ORDER"), "progress"),
	}
	var err error
	for _, d := range []struct {
		to       *time.Duration
		name, by string
	}{
		{&c.MaxWait, "SWITCHYARD_ROUTER_MAX_WAIT", "2m"},
		{&c.AnswerTTL, "SWITCHYARD_ROUTER_ANSWER_TTL", "24h"},
		{&c.StepClaimTTL, "SWITCHYARD_ROUTER_STEP_CLAIM_TTL", "30s"},
		{&c.LedgerClaimIdle, "SWITCHYARD_ROUTER_LEDGER_CLAIM_IDLE", "30s"},
		{&c.BreakerOpen, "SWITCHYARD_ROUTER_BREAKER_OPEN", "30s"},
	} {
		if *d.to, err = time.ParseDuration(cmp.Or(os.Getenv(d.name), d.by)); err != nil || *d.to <= 0 {
			return c, fmt.Errorf("%s: %q is not a positive duration like %s", d.name, os.Getenv(d.name), d.by)
		}
	}
	if c.DefaultMaxTokens, err = strconv.Atoi(cmp.Or(os.Getenv("SWITCHYARD_ROUTER_DEFAULT_MAX_TOKENS"), "4096")); err != nil || c.DefaultMaxTokens <= 0 {
		return c, fmt.Errorf("SWITCHYARD_ROUTER_DEFAULT_MAX_TOKENS: %q is not a positive integer", os.Getenv("SWITCHYARD_ROUTER_DEFAULT_MAX_TOKENS"))
	}
	if c.BreakerFailures, err = strconv.Atoi(cmp.Or(os.Getenv("SWITCHYARD_ROUTER_BREAKER_FAILURES"), "5")); err != nil || c.BreakerFailures < 1 {
		return c, fmt.Errorf("SWITCHYARD_ROUTER_BREAKER_FAILURES: %q is not a positive integer", os.Getenv("SWITCHYARD_ROUTER_BREAKER_FAILURES"))
	}
	if c.ShareRequests, err = strconv.Atoi(cmp.Or(os.Getenv("SWITCHYARD_ROUTER_SHARE_REQUESTS"), "64")); err != nil || c.ShareRequests < 0 {
		return c, fmt.Errorf("SWITCHYARD_ROUTER_SHARE_REQUESTS: %q is not a non-negative integer", os.Getenv("SWITCHYARD_ROUTER_SHARE_REQUESTS"))
	}
	switch c.QueueOrder {
	case "progress", "fifo", "remaining":
	default:
		return c, fmt.Errorf("SWITCHYARD_ROUTER_QUEUE_ORDER: %q is not progress, remaining or fifo", c.QueueOrder)
	}
	if c.DatabaseURL == "" {
		return c, fmt.Errorf("SWITCHYARD_DATABASE_URL is required")
	}
	if !serve {
		return c, nil
	}
	switch {
	case c.RedisURL == "":
		return c, fmt.Errorf("SWITCHYARD_REDIS_URL is required")
	case c.ServiceKeyFile == "":
		return c, fmt.Errorf("SWITCHYARD_SERVICE_KEY_FILE is required (the file holding the service key)")
	}
	return c, c.checkTLS()
}

// checkTLS allows two shapes: full mutual TLS (certificate, key and client CA), or none of
// them on a loopback address — plain HTTP never leaves the machine.
func (c Config) checkTLS() error {
	set := 0
	for _, v := range []string{c.TLSCert, c.TLSKey, c.ClientCA} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 3:
		return nil
	case set > 0:
		return fmt.Errorf("SWITCHYARD_ROUTER_TLS_CERT, SWITCHYARD_ROUTER_TLS_KEY and SWITCHYARD_ROUTER_CLIENT_CA must be set together (mutual TLS)")
	case !Loopback(c.Addr):
		return fmt.Errorf("SWITCHYARD_ROUTER_ADDR %s is not a loopback address: set SWITCHYARD_ROUTER_TLS_CERT, _TLS_KEY and _CLIENT_CA (plain HTTP is allowed on loopback only)", c.Addr)
	}
	return nil
}

// Loopback reports whether a listen address binds only the loopback interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
