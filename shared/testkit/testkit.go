// Package testkit gives each test its own real PostgreSQL database and Redis database.
//
// Databases are cloned from a template that holds the migrated schema (built once per
// schema fingerprint, under an advisory lock, by whichever test process gets there first)
// and dropped when the test ends. Redis databases are handed out by a counter in DB 0 and
// flushed before use. The servers come from SWITCHYARD_TEST_DATABASE_URL and
// SWITCHYARD_TEST_REDIS_URL, which `make test` sets after starting its own servers.
package testkit

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/migrations"
)

// Env names.
const (
	EnvDatabaseURL = "SWITCHYARD_TEST_DATABASE_URL"
	EnvRedisURL    = "SWITCHYARD_TEST_REDIS_URL"
)

// redisDatabases is how many Redis databases the test server is started with.
const redisDatabases = 1024

func env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the tests with `make test`, which starts PostgreSQL and Redis "+
			"and sets it (or `scripts/stack.sh start test && eval $(scripts/stack.sh env test)`)", name)
	}
	return v
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// DB returns the URL of a fresh, migrated database owned by the test, and a pool to it.
func DB(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	admin := env(t, EnvDatabaseURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx, admin) })
	if templateErr != nil {
		t.Fatalf("preparing template database: %v", templateErr)
	}
	name := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connecting to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	dbURL := withDatabase(admin, name)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("opening test database: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("dropping test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("dropping test database %s: %v", name, err)
		}
	})
	return dbURL, pool
}

func ensureTemplate(ctx context.Context, admin string) (string, error) {
	name := "switchyard_tpl_" + migrations.Fingerprint()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connecting to test postgres (%s): %w", EnvDatabaseURL, err)
	}
	defer conn.Close(ctx)
	h := fnv.New64a()
	h.Write([]byte(name))
	lockID := int64(h.Sum64() >> 1)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockID) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(admin, building))
	if err != nil {
		return "", err
	}
	_, err = migrations.Apply(ctx, pool)
	pool.Close()
	if err != nil {
		return "", err
	}
	// Renaming last means a half-built template is never used.
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", err
	}
	return name, nil
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Redis returns the URL of an empty Redis database owned by the test, and a client to it.
// Pub/Sub channels are shared by all databases: use ids unique to the test in channel names.
func Redis(t testing.TB) (string, *redis.Client) {
	t.Helper()
	raw := env(t, EnvRedisURL)
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("parsing %s: %v", EnvRedisURL, err)
	}
	ctx := context.Background()
	opt.DB = 0
	counter := redis.NewClient(opt)
	n, err := counter.Incr(ctx, "switchyard:testkit:next_db").Result()
	_ = counter.Close()
	if err != nil {
		t.Fatalf("connecting to test redis (%s): %v", EnvRedisURL, err)
	}
	opt.DB = 1 + int(n%(redisDatabases-1))
	client := redis.NewClient(opt)
	if err := client.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("flushing test redis db %d: %v", opt.DB, err)
	}
	t.Cleanup(func() {
		_ = client.FlushDB(context.Background()).Err()
		_ = client.Close()
	})
	u, _ := url.Parse(raw)
	u.Path = fmt.Sprintf("/%d", opt.DB)
	return u.String(), client
}
