// Package harness starts Switchyard's real binaries as separate processes, wired the way
// `make run` (scripts/run.sh) wires them, for the end-to-end tests (e2e/), the benchmarks
// and the fault suite (bench/): it builds the binaries once (Build), gives each process its
// own environment and only its own secrets (the service key and mutual-TLS certificates
// between executor and router, the router's credential key ring), migrates and bootstraps
// the development organisation, starts any subset of the services on addresses of their
// own and waits until each answers its readiness check, and lets a fault test kill
// (SIGKILL), stop (SIGTERM) and start each one again on the same address. Close stops
// everything in reverse start order.
//
// The stores are the caller's: a test's own databases from shared/testkit (Test does
// that), or a Postgres and Redis of their own from scripts/stack.sh (Stores).
//
// It is a module of its own so that both e2e/ and bench/ can require it without either
// requiring the other, and without putting process control into shared/, which holds
// only what two services must agree on.
package harness

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Options configure a harness.
type Options struct {
	// Dir holds keys, certificates, the tool catalogue and logs/<service>.log. Required;
	// created if missing.
	Dir string
	// Bin is the directory holding the binaries (see Build). Required.
	Bin string
	// DatabaseURL and RedisURL are the stores. Required.
	DatabaseURL, RedisURL string
	// RouterTLS serves the router over mutual TLS, as `make run` does: the router gets its
	// certificate and the client CA, the executors their client certificate and the CA.
	// Without it the router serves plain HTTP (the service key still applies).
	RouterTLS bool
	// Bootstrap migrates the database and bootstraps the development organisation "dev"
	// with the skill catalogue (skills/) and the tool catalogue (tools/, pointed at this
	// harness's demo-tool), its admin key in AdminKey. It needs the dispatcher binary.
	Bootstrap bool
	// SimArgs and ToolArgs are extra sim-llm and demo-tool flags.
	SimArgs, ToolArgs []string
	// Env is added to every service's environment (later entries win).
	Env []string
	// LogLevel is every service's SWITCHYARD_LOG_LEVEL; default info.
	LogLevel string
	// ReadyTimeout bounds each wait for a service to become ready; default 60 s.
	ReadyTimeout time.Duration
	// StopGrace is how long Close lets a service drain after SIGTERM; default 15 s.
	StopGrace time.Duration
	// Log receives one line per step (started, killed, ...); nil discards.
	Log io.Writer
}

// Harness is a set of services on one pair of stores. Its methods are safe for concurrent
// use.
type Harness struct {
	opts Options
	root string
	tls  *tls.Config // trusts the dev CA (RouterTLS)

	// DispatcherURL, RouterURL, SimURL and ToolURL are the services' base URLs (no
	// trailing slash); RouterURL is https with RouterTLS.
	DispatcherURL, RouterURL, SimURL, ToolURL string
	// AdminKey is the development organisation's admin API key (Options.Bootstrap).
	AdminKey string
	// ServiceKey is the key the executor presents to the router (X-Service-Key).
	ServiceKey string
	// CredentialRecipient is the router's public key, given to the dispatcher: provider API
	// keys set through the admin API are sealed to it.
	CredentialRecipient string
	// TLSDir holds the dev CA and the router's and executor's certificates
	// (`provider-router certs`).
	TLSDir string
	// DBURL and RedisURL are the stores' URLs.
	DBURL, RedisURL string
	// DB is a pool on the database (it reconnects after a Postgres restart); Redis a
	// client of the Redis database.
	DB    *pgxpool.Pool
	Redis *redis.Client

	mu    sync.Mutex
	addrs map[string]string
	procs []*Proc          // every process started, in start order
	last  map[string]*Proc // the latest process of each service
}

// New writes the service key, the certificates and the credential key ring, opens the
// stores and, with Options.Bootstrap, migrates and bootstraps. It starts no service.
func New(ctx context.Context, opts Options) (_ *Harness, err error) {
	if opts.Dir == "" || opts.Bin == "" || opts.DatabaseURL == "" || opts.RedisURL == "" {
		return nil, errors.New("harness: Options.Dir, Bin, DatabaseURL and RedisURL are required")
	}
	opts.LogLevel = cmp.Or(opts.LogLevel, "info")
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = time.Minute
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 15 * time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	h := &Harness{opts: opts, root: root, DBURL: opts.DatabaseURL, RedisURL: opts.RedisURL,
		TLSDir: filepath.Join(opts.Dir, "tls"), addrs: map[string]string{}, last: map[string]*Proc{}}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	for _, name := range append([]string{ExecutorGPU}, Platform...) {
		if h.addrs[name], err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	h.DispatcherURL = "http://" + h.addrs[Dispatcher]
	h.SimURL = "http://" + h.addrs[Sim]
	h.ToolURL = "http://" + h.addrs[Tool]
	h.RouterURL = "http://" + h.addrs[Router]
	if opts.RouterTLS {
		h.RouterURL = "https://" + h.addrs[Router]
	}
	if h.DB, err = pgxpool.New(ctx, h.DBURL); err != nil {
		return nil, err
	}
	ropts, err := redis.ParseURL(h.RedisURL)
	if err != nil {
		return nil, err
	}
	h.Redis = redis.NewClient(ropts)
	if err := h.prepare(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// prepare writes the secrets and, with Options.Bootstrap, migrates and bootstraps.
func (h *Harness) prepare(ctx context.Context) error {
	dir := h.opts.Dir
	h.ServiceKey = "harness-" + rand.Text()
	if err := os.WriteFile(filepath.Join(dir, "service.key"), []byte(h.ServiceKey), 0o600); err != nil {
		return err
	}
	if err := h.Run(ctx, Router, "certs", "--dir", h.TLSDir); err != nil {
		return err
	}
	if err := h.Run(ctx, Router, "credentials", "keygen", "--file", filepath.Join(dir, "router-keys.json")); err != nil {
		return err
	}
	if err := h.Run(ctx, Router, "credentials", "identity", "--file", filepath.Join(dir, "credentials.agekey"),
		"--public-file", filepath.Join(dir, "credentials.pub")); err != nil {
		return err
	}
	pub, err := os.ReadFile(filepath.Join(dir, "credentials.pub"))
	if err != nil {
		return err
	}
	h.CredentialRecipient = strings.TrimSpace(string(pub))
	ca, err := os.ReadFile(filepath.Join(h.TLSDir, "ca.pem"))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	h.tls = &tls.Config{RootCAs: roots}
	if !h.opts.Bootstrap {
		return nil
	}
	// The catalogue points at make run's demo-tool address; this one listens elsewhere.
	toolsDir := filepath.Join(dir, "tools")
	if err := os.MkdirAll(toolsDir, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(h.root, "tools", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b = bytes.ReplaceAll(b, []byte("http://127.0.0.1:8097"), []byte(h.ToolURL))
		if err := os.WriteFile(filepath.Join(toolsDir, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	if err := h.Run(ctx, Dispatcher, "migrate"); err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "admin.key")
	if err := h.Run(ctx, Dispatcher, "bootstrap", "--key-file", keyFile, "--skills", filepath.Join(h.root, "skills"),
		"--workflows", filepath.Join(h.root, "workflows"), "--tools", toolsDir, "--sim-url", h.SimURL+"/v1"); err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	h.AdminKey = strings.TrimSpace(string(key))
	return nil
}

// Root is the repository's root.
func (h *Harness) Root() string { return h.root }

// Addr is the address a service listens on (and comes back on after a restart).
func (h *Harness) Addr(name string) string { return h.addrs[name] }

// Env is a service's environment besides the process's own: the stores, its address, its
// log level and only the secrets it needs (as scripts/run.sh gives them), then
// Options.Env. sim-llm and demo-tool get no store and no secret.
func (h *Harness) Env(name, addr string) []string {
	dir, tlsDir := h.opts.Dir, h.TLSDir
	env := []string{"SWITCHYARD_LOG_LEVEL=" + h.opts.LogLevel}
	stores := []string{"SWITCHYARD_DATABASE_URL=" + h.DBURL, "SWITCHYARD_REDIS_URL=" + h.RedisURL}
	switch name {
	case Router:
		env = append(append(env, stores...), "SWITCHYARD_ROUTER_ADDR="+addr,
			"SWITCHYARD_SERVICE_KEY_FILE="+filepath.Join(dir, "service.key"),
			"SWITCHYARD_ROUTER_KEYS_FILE="+filepath.Join(dir, "router-keys.json"),
			"SWITCHYARD_ROUTER_IDENTITY_FILE="+filepath.Join(dir, "credentials.agekey"))
		if h.opts.RouterTLS {
			env = append(env, "SWITCHYARD_ROUTER_TLS_CERT="+filepath.Join(tlsDir, "router.pem"),
				"SWITCHYARD_ROUTER_TLS_KEY="+filepath.Join(tlsDir, "router-key.pem"),
				"SWITCHYARD_ROUTER_CLIENT_CA="+filepath.Join(tlsDir, "ca.pem"))
		}
	case Executor, ExecutorGPU:
		env = append(append(env, stores...), "SWITCHYARD_EXECUTOR_ADDR="+addr,
			"SWITCHYARD_SERVICE_KEY_FILE="+filepath.Join(dir, "service.key"),
			"SWITCHYARD_ROUTER_URL="+h.RouterURL)
		if h.opts.RouterTLS {
			env = append(env, "SWITCHYARD_ROUTER_CA_FILE="+filepath.Join(tlsDir, "ca.pem"),
				"SWITCHYARD_ROUTER_CERT_FILE="+filepath.Join(tlsDir, "executor.pem"),
				"SWITCHYARD_ROUTER_KEY_FILE="+filepath.Join(tlsDir, "executor-key.pem"))
		}
	case Dispatcher:
		env = append(append(env, stores...), "SWITCHYARD_DISPATCHER_ADDR="+addr,
			"SWITCHYARD_CREDENTIAL_RECIPIENT="+h.CredentialRecipient)
	}
	return append(env, h.opts.Env...)
}

func (h *Harness) args(name, addr string) []string {
	switch name {
	case Sim:
		return append([]string{"--addr", addr}, h.opts.SimArgs...)
	case Tool:
		return append([]string{"--addr", addr}, h.opts.ToolArgs...)
	}
	return []string{"serve"}
}

// ReadyURL is where a service listening on addr says it is ready: the dispatcher's
// /readyz (it answers when Postgres and Redis do), the others' /healthz.
func (h *Harness) ReadyURL(name, addr string) string {
	switch name {
	case Router:
		return strings.SplitN(h.RouterURL, "://", 2)[0] + "://" + addr + "/healthz"
	case Dispatcher:
		return "http://" + addr + "/readyz"
	}
	return "http://" + addr + "/healthz"
}

// Run runs a binary's one-off command (migrate, bootstrap, certs) to completion, with the
// service's environment.
func (h *Harness) Run(ctx context.Context, name string, args ...string) error {
	cmd := h.Command(ctx, name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Command is a binary's command with the service's environment (on its usual address)
// plus env, for a caller that runs it itself.
func (h *Harness) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(h.opts.Bin, name), args...)
	cmd.Env = append(os.Environ(), h.Env(name, h.addrs[name])...)
	return cmd
}

// Spec adjusts one start of a service.
type Spec struct {
	// Addr is where it listens; default its harness address (the same on every restart).
	// A second replica needs an address of its own (FreeAddr).
	Addr string
	// Env is added to the service's environment (later entries win).
	Env []string
	// Args replace the service's arguments (flags for sim-llm and demo-tool, `serve` for
	// the others).
	Args []string
	// NoWait returns once the process has started, without waiting until it is ready.
	NoWait bool
}

// Start starts a service (again) and waits until it is ready.
func (h *Harness) Start(ctx context.Context, name string) (*Proc, error) {
	return h.StartWith(ctx, name, Spec{})
}

// StartAll starts the services in order, each once the one before is ready.
func (h *Harness) StartAll(ctx context.Context, names ...string) error {
	for _, n := range names {
		if _, err := h.Start(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// StartWith starts a service as spec says and waits until it is ready (unless
// spec.NoWait). Its output is appended to Dir/logs/<name>.log.
func (h *Harness) StartWith(ctx context.Context, name string, spec Spec) (*Proc, error) {
	if _, ok := packages[name]; !ok {
		return nil, fmt.Errorf("harness: no service %q", name)
	}
	addr := cmp.Or(spec.Addr, h.addrs[name])
	args := spec.Args
	if args == nil {
		args = h.args(name, addr)
	}
	env := append(append(os.Environ(), h.Env(name, addr)...), spec.Env...)
	h.mu.Lock()
	for _, p := range h.procs {
		if p.Addr == addr && !p.Exited() {
			h.mu.Unlock()
			return nil, fmt.Errorf("%s is already running on %s (pid %d)", p.Name, addr, p.PID())
		}
	}
	p, err := Launch(name, filepath.Join(h.opts.Bin, name), addr, env, args, h.LogPath(name))
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	h.procs = append(h.procs, p)
	h.last[name] = p
	h.mu.Unlock()
	h.logf("%s started on %s (pid %d)", name, addr, p.PID())
	if spec.NoWait {
		return p, nil
	}
	return p, h.WaitReady(ctx, p)
}

// WaitReady waits until p answers its readiness check.
func (h *Harness) WaitReady(ctx context.Context, p *Proc) error {
	client := tlsClient(h.tls)
	defer client.CloseIdleConnections()
	return WaitReady(ctx, client, h.ReadyURL(p.Name, p.Addr), p, h.opts.ReadyTimeout)
}

// Healthy waits until the latest process of every service started so far answers its
// readiness check; one that has exited is an error.
func (h *Harness) Healthy(ctx context.Context) error {
	h.mu.Lock()
	var ps []*Proc
	for _, p := range h.procs {
		if h.last[p.Name] == p {
			ps = append(ps, p)
		}
	}
	h.mu.Unlock()
	for _, p := range ps {
		if p.Exited() {
			return fmt.Errorf("%s is not running; see %s", p.Name, p.Log)
		}
		if err := h.WaitReady(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// Proc is the latest process started for a service, or nil.
func (h *Harness) Proc(name string) *Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[name]
}

// PIDs are the process ids of every running process of a service, in start order (for
// per-process CPU accounting).
func (h *Harness) PIDs(name string) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var pids []int
	for _, p := range h.procs {
		if p.Name == name && !p.Exited() {
			pids = append(pids, p.PID())
		}
	}
	return pids
}

// Kill sends SIGKILL to a service's latest process and waits until it is gone.
func (h *Harness) Kill(name string) error { return h.Signal(name, syscall.SIGKILL, 0) }

// Stop sends SIGTERM to a service's latest process and waits until it has drained and
// exited (SIGKILL after grace).
func (h *Harness) Stop(name string, grace time.Duration) error {
	return h.Signal(name, syscall.SIGTERM, grace)
}

// Signal sends sig to a service's latest process and waits until it has exited (SIGKILL
// after grace unless sig is SIGKILL).
func (h *Harness) Signal(name string, sig syscall.Signal, grace time.Duration) error {
	p := h.Proc(name)
	if p == nil {
		return fmt.Errorf("%s was never started", name)
	}
	if err := p.Signal(sig, grace); err != nil {
		return err
	}
	h.logf("%s stopped (%s)", name, sig)
	return nil
}

// LogPath is where a service's output goes.
func (h *Harness) LogPath(name string) string {
	return filepath.Join(h.opts.Dir, "logs", name+".log")
}

// TLSConfig trusts the dev CA (the router's server certificate).
func (h *Harness) TLSConfig() *tls.Config { return h.tls.Clone() }

// Client is an HTTP client for the router as the executor calls it: presenting the
// executor's certificate with RouterTLS, at most conns connections per host.
func (h *Harness) Client(conns int) (*http.Client, error) {
	cfg := h.TLSConfig()
	cert, err := tls.LoadX509KeyPair(filepath.Join(h.TLSDir, "executor.pem"), filepath.Join(h.TLSDir, "executor-key.pem"))
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{cert}
	return &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: cfg, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}, nil
}

// Admin sends an admin API request to the dispatcher with the admin key and decodes the
// JSON answer into out (when not nil).
func (h *Harness) Admin(ctx context.Context, method, path string, body, out any) error {
	return JSON(ctx, method, h.DispatcherURL+path, http.Header{"Authorization": {"Bearer " + h.AdminKey}}, body, out)
}

// JSON sends a request with body as JSON (none when nil) and decodes a 2xx answer into out
// (when not nil); another status is an error quoting the answer.
func JSON(ctx context.Context, method, url string, header http.Header, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	maps.Copy(req.Header, header)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Close stops every running process (SIGTERM, in reverse start order, SIGKILL after
// Options.StopGrace) and closes the store clients. The stores themselves are the caller's.
func (h *Harness) Close() {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range slices.Backward(procs) {
		if !p.Exited() {
			_ = p.Stop(h.opts.StopGrace)
			h.logf("%s stopped", p.Name)
		}
	}
	if h.DB != nil {
		h.DB.Close()
	}
	if h.Redis != nil {
		_ = h.Redis.Close()
	}
}

func (h *Harness) logf(format string, args ...any) {
	fmt.Fprintf(h.opts.Log, "%s harness: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
