// Package pipelinetest runs the router's whole chain (package pipeline) against a test
// Postgres and Redis, shown as a provider.Adapter, so each adapter package can pass the
// provider conformance suite (providertest) through every link as well as bare.
package pipelinetest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/registry"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// Stack is one chain with every link on: hand-off, routing, residency, ceilings,
// estimate, quota, sealed credentials, ledger, retry, rate limits, breaker, metrics.
type Stack struct {
	pool     *pgxpool.Pool
	creds    *credential.Store
	chain    pipeline.Chatter
	answered atomic.Int64
}

// Start builds a stack on a fresh database and Redis database. When the test ends it
// checks that every answered call reached the usage ledger.
func Start(t *testing.T) *Stack {
	t.Helper()
	_, pool := testkit.DB(t)
	_, rdb := testkit.Redis(t)
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := credential.ParseKeyRing([]byte(`{"current":"k1","keys":{"k1":"` + base64.StdEncoding.EncodeToString(key) + `"}}`))
	require.NoError(t, err)
	lim, err := limiter.New(rdb, limiter.Options{Source: registry.Limits(pool), Logger: log})
	require.NoError(t, err)
	require.NoError(t, lim.Start(ctx))
	est, err := estimate.New(rdb, estimate.Options{})
	require.NoError(t, err)
	led := ledger.New(pool, rdb, log, ledger.Options{Linger: 10 * time.Millisecond})
	require.NoError(t, led.Start(ctx))
	steps := handoff.New(rdb, log, handoff.Options{})
	require.NoError(t, steps.Start(ctx))
	metrics, err := pipeline.NewMetrics()
	require.NoError(t, err)

	s := &Stack{pool: pool, creds: &credential.Store{DB: pool, Ring: ring}}
	s.chain = pipeline.New(pipeline.Parts{
		Log: log, Metrics: metrics, Handoff: steps, Routes: &routing.Resolver{DB: pool}, Prices: &pricing.Table{DB: pool},
		Budget: &budget.Guard{RDB: rdb, Store: budget.PGStore{DB: pool}}, Estimator: est, Credentials: s.creds,
		Ledger: led, Limiter: lim, Breakers: pipeline.NewBreakers(breaker.Options{}, metrics),
		// One attempt: the suite counts the requests an adapter sends and expects each
		// failure as the provider gave it. Retries are the server tests' business.
		Retry: pipeline.Retry{Attempts: 1},
	})
	t.Cleanup(func() {
		if !t.Failed() {
			s.requireLedger(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		led.Stop(ctx)
		lim.Stop()
	})
	return s
}

// requireLedger waits until the ledger holds one row per answered call.
func (s *Stack) requireLedger(t *testing.T) {
	want := s.answered.Load()
	var rows int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM usage_ledger`).Scan(&rows))
		if rows >= want {
			break
		}
	}
	require.Equal(t, want, rows, "every answered call has one usage-ledger row")
}

// Chat counts answered calls on the way through the chain.
func (s *Stack) Chat(ctx context.Context, call *pipeline.Call) (*pipeline.Result, error) {
	res, err := s.chain.Chat(ctx, call)
	if err == nil {
		s.answered.Add(1)
	}
	return res, err
}

// New returns what providertest.Driver.New wants: for each case, an organisation of its
// own whose default route is a provider of kind at baseURL with apiKey sealed in the
// registry, and the stack shown as an adapter calling it. Calls carry no X-Step-Key: a
// step's call outlives its caller by design, which the suite's cancellation cases would
// contradict.
func (s *Stack) New(kind provider.Kind) func(t *testing.T, baseURL, apiKey string) provider.Adapter {
	return func(t *testing.T, baseURL, apiKey string) provider.Adapter {
		t.Helper()
		ctx := context.Background()
		slug := "conf-" + strings.ToLower(rand.Text()[:10])
		var orgID, providerID string
		require.NoError(t, s.pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ($1, 'Conformance') RETURNING id`, slug).Scan(&orgID))
		require.NoError(t, s.pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models)
			VALUES ($1, 'upstream', $2, $3, 'eu', '{"default": "m-1"}') RETURNING id`, orgID, string(kind), baseURL).Scan(&providerID))
		_, err := s.pool.Exec(ctx, `INSERT INTO routing_policies (org_id, hint, provider_config_id) VALUES ($1, 'default', $2)`, orgID, providerID)
		require.NoError(t, err)
		require.NoError(t, s.creds.Set(ctx, slug, "upstream", credential.Secret(apiKey)))
		return pipeline.AsAdapter(s, kind, func() *pipeline.Call {
			now := time.Now()
			return &pipeline.Call{Arrived: now, OrgID: orgID, JobID: uuid.NewString(), JobType: "conformance",
				Residency: "eu_only", Priority: limiter.PriorityNormal, Deadline: now.Add(time.Minute)}
		})
	}
}
