package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// BenchmarkUsage measures the usage report and the audit export over a month of ledger rows
// (SWITCHYARD_BENCH_LEDGER_ROWS, default 1,000,000: 100,000 runs of 10 calls, each call with
// its llm_call span, 1,000 users, 20 skills, 3 models), through the dispatcher's HTTP API,
// beside a bare COPY (SELECT …) TO STDOUT of the same rows — the baseline the ratios in
// docs/PERFORMANCE.md are to. It logs the plans of both queries.
//
// The month's first half is rows as written before migration 00029 (no span_id: the export
// looks each one's span up), its second half rows that name their span; the audit
// sub-benchmarks export each half ("old-rows", "new-rows"), one after the other.
//
//	go test ./internal/api -run '^$' -bench BenchmarkUsage -benchtime 3x -timeout 30m
func BenchmarkUsage(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("SWITCHYARD_BENCH_LEDGER_ROWS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	bb := setupWith(b, app.Options{})
	admin := bb.newKey(auth.RoleAdmin)
	ctx := context.Background()
	runs := n / 10
	start := time.Now()
	// Run ids are derived from their number (md5), so the three inserts agree without a
	// table of them.
	_, err := bb.pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
			execution_type, queue, status, payload)
		SELECT md5('run' || i)::uuid, $1, md5('run' || i)::uuid, 'skill_' || (i % 20), 1, '{}', 'llm_only', 'default',
			'completed', '{}'
		FROM generate_series(1, $2) i`, bb.orgID, runs)
	require.NoError(b, err)
	_, err = bb.pool.Exec(ctx, `INSERT INTO spans (id, run_id, org_id, trace_id, type, name, status, started_at, attributes)
		SELECT md5('span' || i || '/' || s)::uuid, md5('run' || i)::uuid, $1, md5('run' || i)::uuid, 'llm_call', 'llm llm/' || s, 'ok',
			timestamptz '2026-10-01' + (i * 10 + s) * interval '2 seconds', jsonb_build_object('step', 'llm/' || s)
		FROM generate_series(1, $2) i, generate_series(1, 10) s`, bb.orgID, runs)
	require.NoError(b, err)
	testkit.Ledger(b, bb.pool, `INSERT INTO usage_ledger (call_key, step_key, org_id, user_id, run_id, job_type, provider, model,
			tokens_in, tokens_out, tokens_cached, cost_usd, latency_ms, queue_wait_ms, created_at, span_id)
		SELECT i || '/llm/' || s, 'llm/' || s, $1, 'user-' || (i % 1000), md5('run' || i)::uuid, 'skill_' || (i % 20),
			(ARRAY['openai', 'anthropic', 'sim-llm'])[1 + i % 3], (ARRAY['gpt-4o', 'claude-sonnet', 'sim-fast'])[1 + i % 3],
			200 + s, 50 + s, 0, 0.00042 * s, 300, 5, timestamptz '2026-10-01' + (i * 10 + s) * interval '2 seconds',
			CASE WHEN i > $2 / 2 THEN md5('span' || i || '/' || s)::uuid END
		FROM generate_series(1, $2) i, generate_series(1, 10) s`, bb.orgID, runs)
	_, err = bb.pool.Exec(ctx, `VACUUM ANALYZE usage_ledger`)
	require.NoError(b, err)
	_, err = bb.pool.Exec(ctx, `VACUUM ANALYZE spans`)
	require.NoError(b, err)
	b.Logf("wrote %d runs, %d spans and %d ledger rows in %s", runs, runs*10, runs*10, time.Since(start).Round(time.Second))

	const from, to = "2026-10-01", "2026-11-01"
	// The halves: the first new-style row is run runs/2+1's first call.
	mid := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration((runs/2+1)*10+1) * 2 * time.Second).Format(time.RFC3339)
	halves := []struct{ name, from, to string }{{"old-rows", from, mid}, {"new-rows", mid, to}}
	for _, q := range []struct{ name, sql, from, to string }{{"usage", store.UsageSQL, from, to},
		{"audit of old rows", store.AuditSQL, from, mid}, {"audit of new rows", store.AuditSQL, mid, to}} {
		rows, err := bb.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+q.sql, bb.orgID, q.from, q.to)
		require.NoError(b, err)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(b, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(b, rows.Err())
		b.Logf("plan of the %s query:\n%s", q.name, strings.Join(plan, "\n"))
	}

	copyOut := func(b *testing.B, sql, from, to string) int64 {
		conn, err := bb.pool.Acquire(ctx)
		require.NoError(b, err)
		defer conn.Release()
		sql = strings.NewReplacer("$1", "'"+bb.orgID+"'", "$2", "'"+from+"'", "$3", "'"+to+"'").Replace(sql)
		tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, "COPY ("+sql+") TO STDOUT")
		require.NoError(b, err)
		return tag.RowsAffected()
	}
	get := func(b *testing.B, path string) int64 {
		resp := bb.open(admin, path, "")
		defer resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
		size, err := io.Copy(io.Discard, resp.Body)
		require.NoError(b, err)
		return size
	}
	period := fmt.Sprintf("from=%s&to=%s", from, to)
	rate := func(b *testing.B, rows int64) {
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("copy-ledger-rows", func(b *testing.B) { // the baseline: the period's rows as Postgres sends them
		var rows int64
		for b.Loop() {
			rows = copyOut(b, ledgerBenchSQL, from, to)
		}
		require.Equal(b, int64(runs*10), rows)
		rate(b, rows)
	})
	count := func(b *testing.B, from, to string) int64 {
		var n int64
		require.NoError(b, bb.pool.QueryRow(ctx, `SELECT count(*) FROM usage_ledger WHERE org_id = $1
			AND created_at >= $2 AND created_at < $3`, bb.orgID, from, to).Scan(&n))
		return n
	}
	for _, h := range halves {
		b.Run("audit-export/"+h.name, func(b *testing.B) {
			n := count(b, h.from, h.to)
			var size int64
			for b.Loop() {
				size = get(b, fmt.Sprintf("/api/v1/admin/audit?from=%s&to=%s", h.from, h.to))
			}
			rate(b, n)
			b.ReportMetric(float64(size)/float64(n), "bytes/row")
		})
	}
	for _, h := range halves {
		b.Run("audit-export-pseudonymised/"+h.name, func(b *testing.B) {
			n := count(b, h.from, h.to)
			for b.Loop() {
				get(b, fmt.Sprintf("/api/v1/admin/audit?pseudonymise=true&from=%s&to=%s", h.from, h.to))
			}
			rate(b, n)
		})
	}
	for _, h := range halves {
		b.Run("copy-audit-query/"+h.name, func(b *testing.B) { // the export's query alone
			var rows int64
			for b.Loop() {
				rows = copyOut(b, store.AuditSQL, h.from, h.to)
			}
			rate(b, rows)
		})
	}
	b.Run("usage-report", func(b *testing.B) {
		for b.Loop() {
			get(b, "/api/v1/admin/usage?"+period)
		}
	})
	b.Run("usage-csv", func(b *testing.B) {
		for b.Loop() {
			get(b, "/api/v1/admin/usage?format=csv&"+period)
		}
	})
}

// ledgerBenchSQL is the baseline: the period's bare rows.
const ledgerBenchSQL = `SELECT * FROM usage_ledger WHERE org_id = $1 AND created_at >= $2 AND created_at < $3`
