// Package platform runs the whole of Switchyard on this machine as separate processes — its
// own PostgreSQL and Redis (scripts/stack.sh, profile faults, in a directory of its own) and
// the binaries sim-llm, demo-tool, provider-router (mutual TLS), executor and dispatcher, wired
// as `make run` wires them — and controls each of them: kill with SIGKILL, stop with SIGTERM,
// start again, crash a store (Postgres immediate stop, Redis kill -9) and bring it back, wait
// until healthy. It is the process control of the fault suite (bench/internal/faults) and is
// meant to become the one harness of e2e/ and bench/internal/routerstack too.
package platform

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The services, in start order.
const (
	Sim        = "sim-llm"
	Tool       = "demo-tool"
	Router     = "provider-router"
	Executor   = "executor"
	Dispatcher = "dispatcher"
)

// Services lists every service in start order.
var Services = []string{Sim, Tool, Router, Executor, Dispatcher}

// binaries are the packages built when Options.Bin is empty.
var binaries = []string{"dispatcher/cmd/dispatcher", "executor/cmd/executor", "provider-router/cmd/provider-router",
	"provider-router/cmd/sim-llm", "tools/cmd/demo-tool"}

// Options configure a platform.
type Options struct {
	// Dir holds everything: the stores' data, logs/<service>.log, keys and certificates,
	// the tool catalogue pointed at this demo-tool. Required; created if missing.
	Dir string
	// Bin is the directory of the binaries; empty builds them into Dir/bin.
	Bin string
	// PGPort and RedisPort move the stores; 0 keeps the faults profile's 25434 and 26381.
	PGPort, RedisPort int
	// SimArgs are extra sim-llm flags (models, latency).
	SimArgs []string
	// ToolArgs are extra demo-tool flags.
	ToolArgs []string
	// Env is added to every service's environment (later entries win).
	Env []string
	// ReadyTimeout bounds each wait for a process to become healthy; default 60 s.
	ReadyTimeout time.Duration
	// Log receives one line per step (starting, killed, ...); nil discards.
	Log io.Writer
}

// Platform is a running platform. Its methods are safe for concurrent use.
type Platform struct {
	opts  Options
	root  string
	bin   string
	env   []string // what stack.sh needs to find this platform's stores
	tls   *tls.Config
	addrs map[string]string

	// DispatcherURL, SimURL and ToolURL are base URLs (no trailing slash).
	DispatcherURL, SimURL, ToolURL string
	// AdminKey is the development organisation's admin API key.
	AdminKey string
	// DBURL and RedisURL are the stores' URLs.
	DBURL, RedisURL string
	// DB is a pool on the platform's database (it reconnects after a Postgres restart).
	DB *pgxpool.Pool
	// Redis is a client of the platform's Redis.
	Redis *redis.Client

	mu    sync.Mutex
	procs map[string]*proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start builds (unless Options.Bin is set), starts the stores, migrates, bootstraps the
// development organisation with the skill and tool catalogues, starts every service and
// waits until each is healthy. On error it stops whatever it started.
func Start(ctx context.Context, opts Options) (_ *Platform, err error) {
	if opts.Dir == "" {
		return nil, errors.New("platform: Options.Dir is required")
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// Postgres runs as the postgres user when we are root: it must be able to reach its
	// data directory below Dir.
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	p := &Platform{opts: opts, root: root, bin: opts.Bin, procs: map[string]*proc{}, addrs: map[string]string{}}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.bin == "" {
		p.bin = filepath.Join(opts.Dir, "bin")
		p.logf("building %d binaries into %s", len(binaries), p.bin)
		if err := Build(ctx, p.bin); err != nil {
			return nil, err
		}
	}
	p.env = []string{"SWITCHYARD_STACK_DIR=" + filepath.Join(opts.Dir, "stores")}
	if opts.PGPort != 0 {
		p.env = append(p.env, fmt.Sprintf("SWITCHYARD_PG_PORT=%d", opts.PGPort))
	}
	if opts.RedisPort != 0 {
		p.env = append(p.env, fmt.Sprintf("SWITCHYARD_REDIS_PORT=%d", opts.RedisPort))
	}
	// A platform starts from empty stores and logs: stop what a previous run in Dir may
	// have left running, and remove its data.
	if _, err := p.stack(ctx, "stop", "faults"); err != nil {
		return nil, err
	}
	for _, sub := range []string{"stores", "logs"} {
		if err := os.RemoveAll(filepath.Join(opts.Dir, sub)); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(opts.Dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	if err := p.StartStores(ctx); err != nil {
		return nil, err
	}
	if err := p.readStoreURLs(ctx); err != nil {
		return nil, err
	}
	if p.DB, err = pgxpool.New(ctx, p.DBURL); err != nil {
		return nil, err
	}
	ropts, err := redis.ParseURL(p.RedisURL)
	if err != nil {
		return nil, err
	}
	p.Redis = redis.NewClient(ropts)

	for _, name := range Services {
		if p.addrs[name], err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	p.DispatcherURL = "http://" + p.addrs[Dispatcher]
	p.SimURL = "http://" + p.addrs[Sim]
	p.ToolURL = "http://" + p.addrs[Tool]
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	for _, name := range Services {
		if err := p.Start(ctx, name); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Build compiles the platform's binaries into dir.
func Build(ctx context.Context, dir string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, pkg := range binaries {
		args = append(args, "./"+pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// prepare writes the service key and the certificates, migrates, bootstraps the
// development organisation and points the tool catalogue at this platform's demo-tool.
func (p *Platform) prepare(ctx context.Context) error {
	dir := p.opts.Dir
	if err := os.WriteFile(filepath.Join(dir, "service.key"), []byte(rand.Text()), 0o600); err != nil {
		return err
	}
	if err := p.run(ctx, Router, "certs", "--dir", filepath.Join(dir, "tls")); err != nil {
		return err
	}
	if err := p.run(ctx, Router, "credentials", "keygen", "--file", filepath.Join(dir, "router-keys.json")); err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "tls", "ca.pem"))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	p.tls = &tls.Config{RootCAs: roots}

	toolsDir := filepath.Join(dir, "tools")
	if err := os.MkdirAll(toolsDir, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(p.root, "tools", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		// The catalogue points at make run's demo-tool address; ours listens elsewhere.
		b = bytes.ReplaceAll(b, []byte("http://127.0.0.1:8097"), []byte(p.ToolURL))
		if err := os.WriteFile(filepath.Join(toolsDir, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	if err := p.run(ctx, Dispatcher, "migrate"); err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "admin.key")
	if err := p.run(ctx, Dispatcher, "bootstrap", "--key-file", keyFile, "--skills", filepath.Join(p.root, "skills"),
		"--tools", toolsDir, "--sim-url", p.SimURL+"/v1"); err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	p.AdminKey = strings.TrimSpace(string(key))
	return nil
}

// env is a service's environment: the stores, its own address and only the secrets it
// needs (as scripts/run.sh gives them).
func (p *Platform) serviceEnv(name string) []string {
	dir, tlsDir := p.opts.Dir, filepath.Join(p.opts.Dir, "tls")
	env := []string{"SWITCHYARD_DATABASE_URL=" + p.DBURL, "SWITCHYARD_REDIS_URL=" + p.RedisURL, "SWITCHYARD_LOG_LEVEL=info"}
	switch name {
	case Router:
		env = append(env, "SWITCHYARD_ROUTER_ADDR="+p.addrs[Router],
			"SWITCHYARD_SERVICE_KEY_FILE="+filepath.Join(dir, "service.key"),
			"SWITCHYARD_ROUTER_TLS_CERT="+filepath.Join(tlsDir, "router.pem"),
			"SWITCHYARD_ROUTER_TLS_KEY="+filepath.Join(tlsDir, "router-key.pem"),
			"SWITCHYARD_ROUTER_CLIENT_CA="+filepath.Join(tlsDir, "ca.pem"),
			"SWITCHYARD_ROUTER_KEYS_FILE="+filepath.Join(dir, "router-keys.json"))
	case Executor:
		env = append(env, "SWITCHYARD_EXECUTOR_ADDR="+p.addrs[Executor],
			"SWITCHYARD_SERVICE_KEY_FILE="+filepath.Join(dir, "service.key"),
			"SWITCHYARD_ROUTER_URL=https://"+p.addrs[Router],
			"SWITCHYARD_ROUTER_CA_FILE="+filepath.Join(tlsDir, "ca.pem"),
			"SWITCHYARD_ROUTER_CERT_FILE="+filepath.Join(tlsDir, "executor.pem"),
			"SWITCHYARD_ROUTER_KEY_FILE="+filepath.Join(tlsDir, "executor-key.pem"))
	case Dispatcher:
		env = append(env, "SWITCHYARD_DISPATCHER_ADDR="+p.addrs[Dispatcher])
	}
	return append(env, p.opts.Env...)
}

func (p *Platform) args(name string) []string {
	switch name {
	case Sim:
		return append([]string{"--addr", p.addrs[Sim]}, p.opts.SimArgs...)
	case Tool:
		return append([]string{"--addr", p.addrs[Tool]}, p.opts.ToolArgs...)
	}
	return []string{"serve"}
}

// healthURL is where a service says it is ready.
func (p *Platform) healthURL(name string) string {
	switch name {
	case Router:
		return "https://" + p.addrs[Router] + "/healthz"
	case Dispatcher:
		return p.DispatcherURL + "/readyz"
	}
	return "http://" + p.addrs[name] + "/healthz"
}

// run runs a binary's one-off command (migrate, bootstrap, certs) to completion.
func (p *Platform) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Env = append(os.Environ(), p.serviceEnv(name)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts a service (again) and waits until it is healthy. Its output is appended to
// Dir/logs/<name>.log.
func (p *Platform) Start(ctx context.Context, name string) error {
	p.mu.Lock()
	if pr := p.procs[name]; pr != nil && !exited(pr) {
		p.mu.Unlock()
		return fmt.Errorf("%s is already running (pid %d)", name, pr.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd := exec.Command(filepath.Join(p.bin, name), p.args(name)...)
	cmd.Env = append(os.Environ(), p.serviceEnv(name)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a terminal's Ctrl-C reaches the suite, which stops the
	// services in order, not every process at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	p.procs[name] = pr
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(pr.done)
	}()
	p.logf("%s started (pid %d)", name, cmd.Process.Pid)
	return p.waitHealthy(ctx, name, pr)
}

func exited(pr *proc) bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// waitHealthy polls the service's health URL until it answers 200.
func (p *Platform) waitHealthy(ctx context.Context, name string, pr *proc) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: p.tls}}
	defer client.CloseIdleConnections()
	url := p.healthURL(name)
	deadline := time.Now().Add(p.opts.ReadyTimeout)
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if pr != nil && exited(pr) {
			return fmt.Errorf("%s exited during start-up; see %s", name, p.LogPath(name))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not answer 200 within %s; see %s", name, url, p.opts.ReadyTimeout, p.LogPath(name))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Healthy waits until every service answers its health check.
func (p *Platform) Healthy(ctx context.Context) error {
	for _, name := range Services {
		p.mu.Lock()
		pr := p.procs[name]
		p.mu.Unlock()
		if pr == nil || exited(pr) {
			return fmt.Errorf("%s is not running; see %s", name, p.LogPath(name))
		}
		if err := p.waitHealthy(ctx, name, pr); err != nil {
			return err
		}
	}
	return nil
}

// Kill sends SIGKILL to a service and waits until it is gone.
func (p *Platform) Kill(name string) error { return p.signal(name, syscall.SIGKILL, 0) }

// Stop sends SIGTERM to a service and waits until it has drained and exited (SIGKILL after
// grace).
func (p *Platform) Stop(name string, grace time.Duration) error {
	return p.signal(name, syscall.SIGTERM, grace)
}

func (p *Platform) signal(name string, sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	pr := p.procs[name]
	p.mu.Unlock()
	if pr == nil || exited(pr) {
		return fmt.Errorf("%s is not running", name)
	}
	if err := pr.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling %s: %w", name, err)
	}
	if sig != syscall.SIGKILL {
		select {
		case <-pr.done:
		case <-time.After(grace):
			p.logf("%s did not exit within %s of %s: killing it", name, grace, sig)
			_ = pr.cmd.Process.Kill()
		}
	}
	<-pr.done
	p.logf("%s stopped (%s)", name, sig)
	return nil
}

// stack runs scripts/stack.sh with this platform's profile, directory and ports.
func (p *Platform) stack(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.root, "scripts", "stack.sh"), args...)
	cmd.Env = append(os.Environ(), p.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/stack.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// StartStores starts Postgres and Redis, or whichever of them is down, and waits until
// both answer.
func (p *Platform) StartStores(ctx context.Context) error {
	_, err := p.stack(ctx, "start", "faults")
	if err == nil {
		p.logf("stores up")
	}
	return err
}

// CrashStore crashes "postgres" (pg_ctl stop -m immediate) or "redis" (kill -9).
func (p *Platform) CrashStore(ctx context.Context, store string) error {
	_, err := p.stack(ctx, "crash", "faults", store)
	if err == nil {
		p.logf("%s crashed", store)
	}
	return err
}

func (p *Platform) readStoreURLs(ctx context.Context) error {
	out, err := p.stack(ctx, "env", "faults")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, "'")
		switch k {
		case "SWITCHYARD_DATABASE_URL":
			p.DBURL = v
		case "SWITCHYARD_REDIS_URL":
			p.RedisURL = v
		}
	}
	if p.DBURL == "" || p.RedisURL == "" {
		return fmt.Errorf("scripts/stack.sh env faults printed no store URLs: %s", out)
	}
	return nil
}

// LogPath is where a service's output goes.
func (p *Platform) LogPath(name string) string {
	return filepath.Join(p.opts.Dir, "logs", name+".log")
}

// Admin sends an admin API request to the dispatcher with the admin key and decodes the
// JSON answer into out (when not nil).
func (p *Platform) Admin(ctx context.Context, method, path string, body, out any) error {
	return JSON(ctx, method, p.DispatcherURL+path, http.Header{"Authorization": {"Bearer " + p.AdminKey}}, body, out)
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

// Close stops the services (SIGTERM, in reverse start order), then the stores.
func (p *Platform) Close() {
	for i := len(Services) - 1; i >= 0; i-- {
		p.mu.Lock()
		pr := p.procs[Services[i]]
		p.mu.Unlock()
		if pr != nil && !exited(pr) {
			_ = p.Stop(Services[i], 35*time.Second)
		}
	}
	if p.DB != nil {
		p.DB.Close()
	}
	if p.Redis != nil {
		_ = p.Redis.Close()
	}
	if len(p.env) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := p.stack(ctx, "stop", "faults"); err != nil {
			p.logf("stopping the stores: %v", err)
		}
	}
}

func (p *Platform) logf(format string, args ...any) {
	fmt.Fprintf(p.opts.Log, "%s platform: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// FreeAddr returns a loopback address whose port is free now, taken from 27000-29999: below
// Linux's ephemeral range, so that a client socket cannot take it while a killed service is
// down (the service comes back on the same address), and apart from the ports e2e/ hands
// out (21000-23999) and the stack profiles' (25432-26381).
func FreeAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 3000 {
		nextPort++
		if nextPort < 27000 || nextPort >= 30000 {
			nextPort = 27000 + os.Getpid()%1000
		}
		addr := fmt.Sprintf("127.0.0.1:%d", nextPort)
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr, nil
		}
	}
	return "", errors.New("no free port in 27000-29999")
}

var (
	portMu   sync.Mutex
	nextPort int
)

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	var n int
	_, err = fmt.Sscan(port, &n)
	return n, err
}

// RepoRoot is the repository's root: the first directory above the working directory
// that holds go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run from the repository")
		}
		dir = parent
	}
}
