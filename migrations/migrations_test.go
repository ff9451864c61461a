package migrations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scratch returns a pool to an empty database of the test's own on the test server, dropped
// at cleanup. (shared/testkit cannot serve here: it imports this package.)
func scratch(t *testing.T) *pgxpool.Pool {
	t.Helper()
	admin := os.Getenv("SWITCHYARD_TEST_DATABASE_URL")
	if admin == "" {
		t.Fatal("SWITCHYARD_TEST_DATABASE_URL is not set: run the tests with `make test` " +
			"(or `scripts/stack.sh start test && eval $(scripts/stack.sh env test)`)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connecting to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	name := "mig_" + hex.EncodeToString(suffix)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database: %v", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatalf("opening database: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Logf("dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dropping database %s: %v", name, err)
		}
	})
	return pool
}

// downTo undoes migrations down to version v.
func downTo(t *testing.T, pool *pgxpool.Pool, v int64) {
	t.Helper()
	provider, db, err := newProvider(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := provider.DownTo(context.Background(), v); err != nil {
		t.Fatalf("migrating down to %d: %v", v, err)
	}
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestUpDownUp applies every migration, undoes every one and applies them again: each Down
// must undo its Up exactly.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	pool := scratch(t)
	ctx := context.Background()
	latest, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		v, err := Apply(ctx, pool)
		if err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
		if v != latest {
			t.Fatalf("apply %d reached version %d, want %d", i+1, v, latest)
		}
		downTo(t, pool, 0)
	}
}

// TestSkillSnapshotsDownKeepsSnapshots undoes 00013 over a run that references its snapshot:
// the run gets the snapshot back inline, since the column is NOT NULL again below 00013.
func TestSkillSnapshotsDownKeepsSnapshots(t *testing.T) {
	t.Parallel()
	pool := scratch(t)
	ctx := context.Background()
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var orgID string
	if err := pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ('migtest', 'M') RETURNING id`).Scan(&orgID); err != nil {
		t.Fatal(err)
	}
	digest := make([]byte, 32)
	_, _ = rand.Read(digest)
	mustExec(t, pool, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, '{"max_retries": 7}')`,
		digest, orgID)
	const insertRun = `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
		skill_snapshot_digest, execution_type, queue, status, payload)
		VALUES (gen_random_uuid(), $1, gen_random_uuid(), 'x', 1, $2, $3, 'llm_only', 'default', 'queued', '{}')`
	mustExec(t, pool, insertRun, orgID, nil, digest)
	mustExec(t, pool, insertRun, orgID, []byte(`{"max_retries": 2}`), nil)
	if _, err := pool.Exec(ctx, insertRun, orgID, nil, nil); err == nil {
		t.Fatal("a run with neither an inline snapshot nor a digest was accepted")
	}
	other := make([]byte, 32)
	if _, err := pool.Exec(ctx, insertRun, orgID, nil, other); err == nil {
		t.Fatal("a run referencing a snapshot that is not stored was accepted")
	}

	downTo(t, pool, 12)
	rows, err := pool.Query(ctx, `SELECT skill_snapshot->>'max_retries' FROM runs ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "2" || got[1] != "7" {
		t.Fatalf("inline snapshots after down: %v, want [2 7]", got)
	}
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatalf("applying 00013 again: %v", err)
	}
}

// A database that ran a later migration before an earlier one landed (it ran main between
// the two landings) gets the earlier one when it next migrates.
func TestMissingMigrationIsAppliedOutOfOrder(t *testing.T) {
	t.Parallel()
	pool := scratch(t)
	ctx := context.Background()
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	provider, db, err := newProvider(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := provider.ApplyVersion(ctx, 15, false); err != nil { // undo 15 alone
		t.Fatalf("undoing migration 15: %v", err)
	}
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatalf("applying again: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id = 15 AND is_applied`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("migration 15 applied %d times, want 1", n)
	}
}

// TestMonthlyCostBackfill applies 00028 over a ledger that predates it: each organisation's
// counter of each month holds the sum the dispatcher's budget check computed from the ledger
// before (every row of the UTC calendar month, cut-off 'unknown' ones too), its tokens are
// kept, and a month with ledger rows and no counter gets one.
func TestMonthlyCostBackfill(t *testing.T) {
	t.Parallel()
	pool := scratch(t)
	ctx := context.Background()
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	downTo(t, pool, 27)
	var a, b string
	for _, p := range []struct {
		id   *string
		slug string
	}{{&a, "cost-a"}, {&b, "cost-b"}} {
		if err := pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ($1, 'M') RETURNING id`, p.slug).Scan(p.id); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, pool, `INSERT INTO org_monthly_usage (org_id, month, tokens) VALUES ($1, '2026-10-01', 555)`, a)
	const ledger = `INSERT INTO usage_ledger (org_id, provider, model, tokens_in, tokens_out, cost_usd, latency_ms,
		created_at, outcome) VALUES ($1, 'p', 'm', 1, 1, $2, 1, $3, $4)`
	for _, r := range []struct {
		org, at, outcome string
		cost             string
	}{
		{a, "2026-10-01 00:00:00+00", "answered", "0.12345678"},
		{a, "2026-10-31 23:59:59.999+00", "answered", "1.5"},
		{a, "2026-10-31 23:30:00-02", "answered", "7"}, // 1 November, 01:30 UTC
		{a, "2026-10-15 12:00:00+00", "unknown", "0"},
		{a, "2026-09-30 22:00:00-05", "answered", "0.00000001"}, // 1 October, 03:00 UTC
		{b, "2026-10-02 00:00:00+00", "answered", "99999.99999999"},
		{b, "2026-10-03 00:00:00+00", "answered", "99999.99999999"},
	} {
		mustExec(t, pool, ledger, r.org, r.cost, r.at, r.outcome)
	}
	if _, err := Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}

	// What store.MonthlyCost summed before 00028, for each (organisation, month) above.
	const before = `SELECT COALESCE(sum(cost_usd), 0)::text FROM usage_ledger
		WHERE org_id = $1 AND created_at >= $2::timestamptz AND created_at < $2::date + interval '1 month'`
	for _, c := range []struct {
		org, month string
		tokens     int64
		want       string
	}{
		{a, "2026-10-01", 555, "1.62345679"},
		{a, "2026-11-01", 0, "7.00000000"},
		{b, "2026-10-01", 0, "199999.99999998"},
	} {
		var sum, cost string
		if err := pool.QueryRow(ctx, before, c.org, c.month).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		var tokens int64
		if err := pool.QueryRow(ctx, `SELECT cost_usd::text, tokens FROM org_monthly_usage WHERE org_id = $1 AND month = $2`,
			c.org, c.month).Scan(&cost, &tokens); err != nil {
			t.Fatalf("counter of %s: %v", c.month, err)
		}
		if cost != sum || cost != c.want || tokens != c.tokens {
			t.Fatalf("%s %s: counter %s (tokens %d), ledger sum %s, want %s (tokens %d)",
				c.org, c.month, cost, tokens, sum, c.want, c.tokens)
		}
	}
	var months int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM org_monthly_usage`).Scan(&months); err != nil {
		t.Fatal(err)
	}
	if months != 3 {
		t.Fatalf("%d counters, want 3", months)
	}
}
