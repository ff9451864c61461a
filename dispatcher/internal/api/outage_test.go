package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

type outage struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
	key  string
}

// setupOutage builds a dispatcher whose Postgres, Redis or queue Redis may be unreachable.
func setupOutage(t *testing.T, deadDB, deadRedis, deadQueue bool) outage {
	t.Helper()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	_, rdb := testkit.Redis(t)
	orgID, err := bootstrap.EnsureOrg(ctx, pool, "acme", "Acme", "eu")
	require.NoError(t, err)
	key, _, err := auth.Create(ctx, pool, orgID, "test", []auth.Role{auth.RoleDispatch}, "test")
	require.NoError(t, err)
	_, err = bootstrap.LoadSkills(ctx, pool, orgID, filepath.Join("..", "..", "..", "skills"), "test")
	require.NoError(t, err)

	appPool := pool
	if deadDB {
		appPool, err = pgxpool.New(ctx, "postgres://postgres@"+deadAddr(t)+"/x?connect_timeout=1")
		require.NoError(t, err)
		t.Cleanup(appPool.Close)
	}
	appRedis := redis.UniversalClient(rdb)
	if deadRedis {
		dead := redis.NewClient(&redis.Options{Addr: deadAddr(t), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { dead.Close() })
		appRedis = dead
	}
	queueOpt := asynq.RedisClientOpt{Addr: rdb.Options().Addr, DB: rdb.Options().DB}
	if deadQueue || deadRedis {
		queueOpt = asynq.RedisClientOpt{Addr: deadAddr(t), DialTimeout: 200 * time.Millisecond}
	}
	a := app.New(app.Options{DB: appPool, Redis: appRedis, Asynq: queueOpt,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ReconcileEvery: time.Hour})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Stop() })
	return outage{srv: srv, pool: pool, key: key}
}

func (o outage) dispatch(t *testing.T) (int, map[string]any) {
	b := &bundle{t: t, srv: o.srv}
	return b.do(o.key, http.MethodPost, "/api/v1/dispatch", demo)
}

func (o outage) runs(t *testing.T) int {
	var n int
	require.NoError(t, o.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	return n
}

func TestPostgresDownIsDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, true, false, false)
	code, res := o.dispatch(t)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", res)
	require.Equal(t, "DATABASE_UNAVAILABLE", res["code"])
	b := &bundle{t: t, srv: o.srv}
	code, res = b.do("", http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unreachable", res["context"].(map[string]any)["checks"].(map[string]any)["postgres"])
}

func TestRedisDownIsQueueUnavailable(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, false, true, false)
	code, res := o.dispatch(t)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", res)
	require.Equal(t, "QUEUE_UNAVAILABLE", res["code"])
	require.Zero(t, o.runs(t), "nothing is recorded")
}

// TestEnqueueFailureTakesTheRunBack covers the moment after the run is recorded: if the
// enqueue fails the run is removed and the client gets a 503, never a 202.
func TestEnqueueFailureTakesTheRunBack(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, false, false, true)
	code, res := o.dispatch(t)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", res)
	require.Equal(t, "QUEUE_UNAVAILABLE", res["code"])
	require.Zero(t, o.runs(t), "the recorded run was taken back")
}
