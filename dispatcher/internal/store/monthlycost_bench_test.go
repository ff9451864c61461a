package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// ledgerSumSQL is how MonthlyCost read the month's cost before migration 00028: the sum of
// the organisation's usage_ledger rows of the month.
const ledgerSumSQL = `SELECT COALESCE(sum(cost_usd), 0)::float8 FROM usage_ledger
	WHERE org_id = $1 AND created_at >= $2 AND created_at < $2::date + interval '1 month'`

// BenchmarkMonthlyCost measures the cost budget's read of the month's cost (store.MonthlyCost,
// which the dispatcher's budget check runs at most once a second per budgeted organisation,
// and the usage report once a request) over this month's ledger rows of one organisation
// (SWITCHYARD_BENCH_LEDGER_ROWS, default 1,000,000): the one org_monthly_usage row it reads
// now ("counter-row") against the sum of the ledger rows it computed before ("ledger-sum"),
// interleaved in SWITCHYARD_BENCH_ROUNDS rounds (default 3). Both answer the same figure.
//
//	go test ./internal/store -run '^$' -bench BenchmarkMonthlyCost -timeout 30m
func BenchmarkMonthlyCost(b *testing.B) {
	n, rounds := envInt(b, "SWITCHYARD_BENCH_LEDGER_ROWS", 1_000_000), envInt(b, "SWITCHYARD_BENCH_ROUNDS", 3)
	_, pool := testkit.DB(b)
	orgID := testkit.NewOrg(b, pool)
	ctx := context.Background()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	testkit.Ledger(b, pool, `INSERT INTO usage_ledger (call_key, step_key, org_id, user_id, job_type, provider, model,
			tokens_in, tokens_out, cost_usd, latency_ms, created_at)
		SELECT 'k' || i, 'llm/1', $1, 'user-' || (i % 1000), 'skill_' || (i % 20), 'openai', 'gpt-4o',
			200 + i % 7, 50 + i % 5, 0.00042 * (1 + i % 10), 300, $2::timestamptz + i * interval '1 millisecond'
		FROM generate_series(1, $3) i`, orgID, month, n)
	_, err := pool.Exec(ctx, `VACUUM ANALYZE usage_ledger`)
	require.NoError(b, err)
	b.Logf("wrote %d ledger rows in %s", n, time.Since(start).Round(time.Second))

	var sum float64
	require.NoError(b, pool.QueryRow(ctx, ledgerSumSQL, orgID, month).Scan(&sum))
	got, err := store.MonthlyCost(ctx, pool, orgID, now)
	require.NoError(b, err)
	require.InDelta(b, sum, got, 1e-6, "the counter row and the ledger's sum agree")

	for _, q := range []struct{ name, sql string }{{"ledger-sum", ledgerSumSQL}, {"counter-row", store.MonthlyCostSQL}} {
		rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+q.sql, orgID, month)
		require.NoError(b, err)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(b, err)
		b.Logf("plan of %s:\n%s", q.name, strings.Join(plan, "\n"))
	}

	for range rounds {
		b.Run("ledger-sum", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, pool.QueryRow(ctx, ledgerSumSQL, orgID, month).Scan(&sum))
			}
		})
		b.Run("counter-row", func(b *testing.B) {
			for b.Loop() {
				_, err := store.MonthlyCost(ctx, pool, orgID, now)
				require.NoError(b, err)
			}
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err)
	return n
}
