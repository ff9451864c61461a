package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/registry"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/server"
	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// The development CA is made once for the package; every test's router and clients use it.
var (
	caOnce sync.Once
	caDir  string
	caErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "router-tls")
	if err != nil {
		panic(err)
	}
	caDir = dir
	// The server's limiter, ledger, hand-off and registry run goroutines; none may outlive
	// the test that started them.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func devCA(t testing.TB) string {
	caOnce.Do(func() { _, caErr = mtls.EnsureDevCA(caDir) })
	require.NoError(t, caErr)
	return caDir
}

// syncBuffer is a log sink the test can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type options struct {
	models       []sim.ModelConfig
	upstream     http.Handler // instead of sim-llm
	jurisdiction string
	retry        server.Retry
	breaker      breaker.Options
	ring         *credential.KeyRing
	shares       int // limiter.Allowance.Requests: 0, local admission off
	// ledgerProxy puts a cuttable TCP proxy between the ledger and Postgres (bundle.pgProxy).
	ledgerProxy bool
}

// bundle is one test's router (mTLS on) in front of sim-llm or a fake upstream.
type bundle struct {
	t          testing.TB
	pool       *pgxpool.Pool
	rdb        *redis.Client
	orgID      string
	orgSlug    string
	providerID string
	sim        *sim.Server
	srv        *server.Server
	url        string
	client     *http.Client
	logs       *syncBuffer
	serviceKey string
	dbURL      string
	// pgProxy is the ledger's way to Postgres when options.ledgerProxy is set.
	pgProxy *testkit.Proxy
}

func setup(t testing.TB, opts options) *bundle {
	t.Helper()
	dbURL, pool := testkit.DB(t)
	_, rdb := testkit.Redis(t)
	b := &bundle{t: t, pool: pool, rdb: rdb, logs: &syncBuffer{}, serviceKey: "svc-" + rand.Text(), dbURL: dbURL}
	ctx := context.Background()

	upstream := opts.upstream
	if upstream == nil {
		models := opts.models
		if models == nil {
			models = []sim.ModelConfig{{Name: "sim-fast", Output: "uniform:10-30"}}
		}
		s, err := sim.New(sim.Config{Models: models}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		b.sim, upstream = s, s.Handler()
	}
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	if g, ok := upstream.(*gated); ok {
		t.Cleanup(g.open) // before up.Close: a held answer would keep Close waiting
	}

	b.orgSlug = "org-" + strings.ToLower(rand.Text()[:8])
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ($1, 'Test') RETURNING id`, b.orgSlug).Scan(&b.orgID))
	jur := opts.jurisdiction
	if jur == "" {
		jur = "eu"
	}
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models)
		VALUES ($1, 'upstream', 'openai_compatible', $2, $3, '{"default": "sim-fast"}') RETURNING id`,
		b.orgID, up.URL+"/v1", jur).Scan(&b.providerID))
	_, err := pool.Exec(ctx, `INSERT INTO routing_policies (org_id, hint, provider_config_id) VALUES ($1, 'default', $2)`,
		b.orgID, b.providerID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO prices (provider_kind, model, input_per_mtok, output_per_mtok)
		VALUES ('openai_compatible', 'sim-fast', 0.15, 0.60) ON CONFLICT DO NOTHING`)
	require.NoError(t, err)

	b.srv = b.newServer(opts)
	b.url = b.serve(b.srv)
	b.client = b.clientWith(mtls.ExecutorFile, mtls.ExecutorKeyFile)
	return b
}

// newServer builds a router replica on the bundle's Postgres and Redis.
func (b *bundle) newServer(opts options) *server.Server {
	t := b.t
	log := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lim, err := limiter.New(b.rdb, limiter.Options{Source: registry.Limits(b.pool), Logger: log,
		Allowance: limiter.Allowance{Requests: opts.shares}})
	require.NoError(t, err)
	require.NoError(t, lim.Start(context.Background()))
	est, err := estimate.New(b.rdb, estimate.Options{})
	require.NoError(t, err)
	ledgerDB := b.pool
	if opts.ledgerProxy {
		ledgerDB, b.pgProxy = testkit.ProxiedDB(t, b.dbURL)
	}
	led := ledger.New(ledgerDB, b.rdb, log, ledger.Options{Linger: 10 * time.Millisecond, ClaimIdle: time.Second})
	require.NoError(t, led.Start(context.Background()))
	steps := handoff.New(b.rdb, log, handoff.Options{RunStopped: handoff.RunStopped(b.pool)})
	require.NoError(t, steps.Start(context.Background()))
	roots, err := mtls.LoadPool(filepath.Join(devCA(t), mtls.CAFile))
	require.NoError(t, err)
	retry := opts.retry
	if retry.Backoff == 0 {
		retry.Backoff = 10 * time.Millisecond
	}
	s := &server.Server{
		DB: b.pool, ServiceKey: b.serviceKey, AllowedCallers: []string{"executor"},
		MTLS:   mtls.NewVerifier(roots, []string{"executor"}),
		Routes: &routing.Resolver{DB: b.pool}, Prices: &pricing.Table{DB: b.pool},
		Credentials: &credential.Store{DB: b.pool, Ring: opts.ring},
		Limiter:     lim, Estimator: est, Breakers: breaker.New(opts.breaker),
		Budget: &budget.Guard{RDB: b.rdb, Store: budget.PGStore{DB: b.pool}},
		Ledger: led, Handoff: steps, Log: log, Retry: retry, HTTPClient: &http.Client{},
	}
	t.Cleanup(func() {
		s.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		led.Stop(ctx)
		lim.Stop()
	})
	return s
}

// serve starts a TLS listener for a replica (cleaned up before the replica's parts).
func (b *bundle) serve(s *server.Server) string {
	ts := httptest.NewUnstartedServer(s.Handler())
	cfg, err := mtls.ServerConfig(filepath.Join(devCA(b.t), mtls.RouterFile), filepath.Join(devCA(b.t), mtls.RouterKeyFile))
	require.NoError(b.t, err)
	ts.TLS = cfg
	ts.StartTLS()
	b.t.Cleanup(ts.Close)
	return ts.URL
}

// clientWith returns an HTTPS client trusting the dev CA and presenting the given
// certificate (files in the CA dir); empty names present none.
func (b *bundle) clientWith(certFile, keyFile string) *http.Client {
	dir := devCA(b.t)
	pemBytes, err := os.ReadFile(filepath.Join(dir, mtls.CAFile))
	require.NoError(b.t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	cfg := &tls.Config{RootCAs: roots}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
		require.NoError(b.t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}
}

func clientWithPEM(t testing.TB, certPEM, keyPEM []byte) *http.Client {
	pemBytes, err := os.ReadFile(filepath.Join(devCA(t), mtls.CAFile))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
}

// headers are a valid executor call's headers; tests override or delete entries.
func (b *bundle) headers() map[string]string {
	return map[string]string{
		"X-Service-Key": b.serviceKey, "X-Caller-Service": "executor", "X-Org-ID": b.orgID,
		"X-Job-ID": uuid(), "X-Trace-ID": uuid(), "X-Job-Type": "test-skill",
	}
}

func uuid() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

const simpleBody = `{"model":"","max_tokens":20,"messages":[{"role":"user","content":"Say something short about routers."}]}`

// chatVia posts a chat call with client to url and decodes the answer.
func chatVia(t testing.TB, client *http.Client, url string, h map[string]string, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/internal/ai/chat", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	return resp.StatusCode, out, resp.Header
}

func (b *bundle) chat(h map[string]string, body string) (int, map[string]any) {
	b.t.Helper()
	code, out, _ := chatVia(b.t, b.client, b.url, h, body)
	return code, out
}

func (b *bundle) served() int64 {
	return b.sim.Stats().Total.Served
}

func errCode(out map[string]any) string {
	c, _ := out["code"].(string)
	return c
}
