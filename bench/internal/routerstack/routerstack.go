// Package routerstack starts what the router benchmarks measure: sim-llm and provider-router
// binaries (mutual TLS on, limits and ledger on) against a fresh Postgres database and
// Redis database from the test servers (SWITCHYARD_TEST_DATABASE_URL /
// SWITCHYARD_TEST_REDIS_URL, via shared/testkit), and registers organisations whose routing
// points at the simulator.
package routerstack

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/bench/internal/platform"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// tb lets a command use testkit's fresh databases: testkit asks for a testing.TB only to
// fail, log and clean up. Methods testkit does not call panic (the embedded nil TB).
type tb struct {
	testing.TB
	cleanups []func()
}

func (*tb) Helper()                           {}
func (*tb) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*tb) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *tb) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }

// Stack is the processes and stores of one benchmark run.
type Stack struct {
	Bin, Dir        string
	DBURL, RedisURL string
	Pool            *pgxpool.Pool
	ServiceKey      string
	tb              *tb
	procs           []*exec.Cmd
}

// Start builds the binaries (unless bin names a directory holding them) and creates the
// stores. Close undoes everything.
func Start(bin string) (*Stack, error) {
	s := &Stack{tb: &tb{}}
	dir, err := os.MkdirTemp("", "routerbench")
	if err != nil {
		return nil, err
	}
	s.Dir = dir
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		root, err := platform.RepoRoot()
		if err != nil {
			return nil, err
		}
		for _, pkg := range []string{"provider-router/cmd/provider-router", "provider-router/cmd/sim-llm"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(bin, filepath.Base(pkg)), "./"+pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			}
		}
	}
	s.Bin = bin
	s.DBURL, s.Pool = testkit.DB(s.tb)
	s.RedisURL, _ = testkit.Redis(s.tb)
	s.ServiceKey = "bench-" + rand.Text()
	if err := os.WriteFile(filepath.Join(dir, "service.key"), []byte(s.ServiceKey), 0o600); err != nil {
		return nil, err
	}
	out, err := exec.Command(filepath.Join(bin, "provider-router"), "certs", "--dir", filepath.Join(dir, "tls")).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("provider-router certs: %v: %s", err, out)
	}
	return s, nil
}

// Close stops the processes and drops the stores.
func (s *Stack) Close() {
	for _, p := range s.procs {
		_ = p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
		}
	}
	for i := len(s.tb.cleanups) - 1; i >= 0; i-- {
		s.tb.cleanups[i]()
	}
	os.RemoveAll(s.Dir)
}

// FreeAddr returns a free loopback address.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *Stack) start(name string, env []string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.Bin, name), args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(s.Dir, fmt.Sprintf("%s-%d.log", name, len(s.procs))))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// PIDs are the process ids of the binaries started under name (e.g. "provider-router"),
// in start order: for per-process CPU accounting (hostcpu.Process).
func (s *Stack) PIDs(name string) []int {
	var pids []int
	for _, p := range s.procs {
		if filepath.Base(p.Path) == name {
			pids = append(pids, p.Process.Pid)
		}
	}
	return pids
}

// StartSim starts sim-llm with args and returns its base URL (without /v1).
func (s *Stack) StartSim(args ...string) (string, error) {
	addr := FreeAddr()
	if err := s.start("sim-llm", nil, append([]string{"--addr", addr, "--log-level", "warn"}, args...)...); err != nil {
		return "", err
	}
	url := "http://" + addr
	return url, waitHealthy(http.DefaultClient, url+"/healthz")
}

// StartRouter starts a provider-router replica with mutual TLS and returns its URL.
func (s *Stack) StartRouter(extraEnv ...string) (string, error) {
	addr := FreeAddr()
	tlsDir := filepath.Join(s.Dir, "tls")
	env := append([]string{
		"SWITCHYARD_DATABASE_URL=" + s.DBURL, "SWITCHYARD_REDIS_URL=" + s.RedisURL,
		"SWITCHYARD_ROUTER_ADDR=" + addr, "SWITCHYARD_SERVICE_KEY_FILE=" + filepath.Join(s.Dir, "service.key"),
		"SWITCHYARD_ROUTER_TLS_CERT=" + filepath.Join(tlsDir, "router.pem"),
		"SWITCHYARD_ROUTER_TLS_KEY=" + filepath.Join(tlsDir, "router-key.pem"),
		"SWITCHYARD_ROUTER_CLIENT_CA=" + filepath.Join(tlsDir, "ca.pem"),
		"SWITCHYARD_LOG_LEVEL=warn",
	}, extraEnv...)
	if err := s.start("provider-router", env); err != nil {
		return "", err
	}
	url := "https://" + addr
	return url, waitHealthy(s.Client(1), url+"/healthz")
}

// Client is an HTTPS client presenting the executor's certificate.
func (s *Stack) Client(conns int) *http.Client {
	tlsDir := filepath.Join(s.Dir, "tls")
	ca, _ := os.ReadFile(filepath.Join(tlsDir, "ca.pem"))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "executor.pem"), filepath.Join(tlsDir, "executor-key.pem"))
	if err != nil {
		panic(err)
	}
	return &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}
}

func waitHealthy(c *http.Client, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become healthy", url)
}

// Org is a registered organisation routed to one provider config.
type Org struct{ ID, ProviderID string }

// NewOrg registers an organisation whose default hint routes to baseURL (sim-llm's /v1)
// serving model, with a price and the given limits (0: unlimited).
func (s *Stack) NewOrg(ctx context.Context, baseURL, model string, rpm, tpm int) (Org, error) {
	var o Org
	slug := "bench-" + strings.ToLower(rand.Text()[:10])
	models, _ := json.Marshal(map[string]string{"default": model})
	if err := s.Pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&o.ID); err != nil {
		return o, err
	}
	if err := s.Pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models)
		VALUES ($1, 'sim', 'openai_compatible', $2, 'eu', $3) RETURNING id`, o.ID, baseURL, models).Scan(&o.ProviderID); err != nil {
		return o, err
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO routing_policies (org_id, hint, provider_config_id) VALUES ($1, 'default', $2)`, o.ID, o.ProviderID); err != nil {
		return o, err
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO prices (provider_kind, model, input_per_mtok, output_per_mtok)
		VALUES ('openai_compatible', $1, 0.1, 0.4) ON CONFLICT DO NOTHING`, model); err != nil {
		return o, err
	}
	if rpm > 0 || tpm > 0 {
		if _, err := s.Pool.Exec(ctx, `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm) VALUES ($1, $2, $3, $4)`,
			o.ProviderID, model, rpm, tpm); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Headers are a router call's headers for org.
func (s *Stack) Headers(o Org) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Service-Key", s.ServiceKey)
	h.Set("X-Caller-Service", "executor")
	h.Set("X-Org-ID", o.ID)
	return h
}

// UUID returns a random version-4 UUID.
func UUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// SimCounters are sim-llm's totals of calls served and refused.
type SimCounters struct {
	Served     int64 `json:"served"`
	Refused429 int64 `json:"refused_429"`
}

// SimStats reads sim-llm's counters (GET /sim/stats).
func SimStats(simURL string) (SimCounters, error) {
	resp, err := http.Get(simURL + "/sim/stats")
	if err != nil {
		return SimCounters{}, err
	}
	defer resp.Body.Close()
	var s struct {
		Total SimCounters `json:"total"`
	}
	return s.Total, json.NewDecoder(resp.Body).Decode(&s)
}
