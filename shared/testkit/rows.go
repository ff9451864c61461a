package testkit

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/shared/monthusage"
)

// NewOrg inserts an organisation and returns its id.
func NewOrg(t testing.TB, pool *pgxpool.Pool) (orgID string) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `INSERT INTO orgs (slug, name) VALUES ($1, 'Test') RETURNING id`,
		"o"+uuid.NewString()[:8]).Scan(&orgID); err != nil {
		t.Fatalf("inserting an organisation: %v", err)
	}
	return orgID
}

// NewRun inserts an organisation of its own and one llm_only run of it in the given status,
// and returns the run's id and the organisation's.
func NewRun(t testing.TB, pool *pgxpool.Pool, status string) (runID, orgID string) {
	t.Helper()
	ctx := context.Background()
	orgID = NewOrg(t, pool)
	runID = uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
		execution_type, queue, status, payload) VALUES ($1, $2, $3, 'x', 1, '{}', 'llm_only', 'default', $4, '{}')`,
		runID, orgID, uuid.NewString(), status); err != nil {
		t.Fatalf("inserting a run: %v", err)
	}
	return runID, orgID
}

// Ledger seeds usage_ledger: it runs insert, an INSERT INTO usage_ledger … without a
// RETURNING clause, with args, and adds the rows it writes to their organisations' monthly
// counters (org_monthly_usage: tokens and cost) in the same statement, as the provider
// router's ledger mover does, so that the quota and budget checks, which read the counters,
// see what the ledger holds.
func Ledger(t testing.TB, pool *pgxpool.Pool, insert string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), "WITH ins AS ("+insert+" "+monthusage.ReturningSQL+") "+monthusage.AddSQL,
		args...); err != nil {
		t.Fatalf("seeding the usage ledger: %v", err)
	}
}

// Explain returns Postgres's plan for query (EXPLAIN, not run) on conn, one line per node.
func Explain(t testing.TB, conn *pgxpool.Conn, query string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatalf("explaining %q: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explaining %q: %v", query, err)
	}
	return strings.Join(lines, "\n")
}
