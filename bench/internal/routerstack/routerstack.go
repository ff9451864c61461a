// Package routerstack starts what the router benchmarks measure — sim-llm and
// provider-router replicas (mutual TLS on, limits and ledger on), through the process
// harness (harness/) — against a fresh Postgres database and Redis database from the test
// servers (SWITCHYARD_TEST_DATABASE_URL / SWITCHYARD_TEST_REDIS_URL, via shared/testkit),
// and registers organisations whose routing points at the simulator.
package routerstack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/harness"
)

// Stack is the processes and stores of one benchmark run.
type Stack struct {
	// H is the harness running the processes.
	H *harness.Harness
	// Pool is a pool on the run's database.
	Pool *pgxpool.Pool
	// ServiceKey is the key callers present to the router.
	ServiceKey string
	dir        string
	drop       func()
}

// Start builds provider-router and sim-llm (unless bin names a directory holding them),
// creates the stores and prepares the secrets. Close undoes everything.
func Start(bin string) (_ *Stack, err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "routerbench")
	if err != nil {
		return nil, err
	}
	s := &Stack{dir: dir, drop: func() {}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		if err := harness.Build(ctx, bin, harness.Router, harness.Sim); err != nil {
			return nil, err
		}
	}
	dbURL, redisURL, drop, err := harness.TestkitStores()
	if err != nil {
		return nil, err
	}
	s.drop = drop
	s.H, err = harness.New(ctx, harness.Options{Dir: dir, Bin: bin, DatabaseURL: dbURL, RedisURL: redisURL,
		RouterTLS: true, LogLevel: "warn", StopGrace: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	s.Pool, s.ServiceKey = s.H.DB, s.H.ServiceKey
	return s, nil
}

// Close stops the processes and drops the stores.
func (s *Stack) Close() {
	if s.H != nil {
		s.H.Close()
	}
	s.drop()
	os.RemoveAll(s.dir)
}

// FreeAddr returns a free loopback address.
func FreeAddr() string {
	addr, err := harness.FreeAddr()
	if err != nil {
		panic(err)
	}
	return addr
}

// PIDs are the process ids of the binaries started under name (e.g. "provider-router"),
// in start order: for per-process CPU accounting (hostcpu.Process).
func (s *Stack) PIDs(name string) []int { return s.H.PIDs(name) }

// StartSim starts sim-llm with args and returns its base URL (without /v1).
func (s *Stack) StartSim(args ...string) (string, error) {
	addr := FreeAddr()
	_, err := s.H.StartWith(context.Background(), harness.Sim,
		harness.Spec{Addr: addr, Args: append([]string{"--addr", addr, "--log-level", "warn"}, args...)})
	return "http://" + addr, err
}

// StartRouter starts a provider-router replica with mutual TLS and returns its URL.
func (s *Stack) StartRouter(extraEnv ...string) (string, error) {
	addr := FreeAddr()
	_, err := s.H.StartWith(context.Background(), harness.Router, harness.Spec{Addr: addr, Env: extraEnv})
	return "https://" + addr, err
}

// Client is an HTTPS client presenting the executor's certificate.
func (s *Stack) Client(conns int) *http.Client {
	c, err := s.H.Client(conns)
	if err != nil {
		panic(err)
	}
	return c
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
