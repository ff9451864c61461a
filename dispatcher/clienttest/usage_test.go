package client_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestUsageReportCSVAndAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
	testkit.Ledger(t, b.pool, `INSERT INTO usage_ledger (org_id, user_id, job_type, provider, model, tokens_in, tokens_out,
			cost_usd, latency_ms, created_at)
		SELECT $1, 'user-' || (i % 3), 'skill_' || (i % 2), 'openai', 'gpt-4o', 10, 5, 0.25, 100, $2::timestamptz + i * interval '1 hour'
		FROM generate_series(0, 49) i`, b.orgID, at)
	q := client.UsageQuery{From: at, To: at.AddDate(0, 0, 7), Users: 2}

	u, err := b.admin.Org.UsageReport(ctx, q)
	require.NoError(t, err)
	require.Equal(t, int64(50), u.Calls)
	require.InDelta(t, 12.5, u.CostUSD, 1e-9)
	require.Len(t, u.ByDay, 3)
	require.Len(t, u.ByUser, 2)
	require.Equal(t, int64(3), u.UsersTotal)
	require.Equal(t, "skill_0", u.BySkill[0].Key)

	var buf bytes.Buffer
	_, err = b.admin.Org.UsageCSV(ctx, q, &buf)
	require.NoError(t, err)
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "day", rows[0][0])
	require.Len(t, rows, 1+3*2*3) // days × skills × users

	buf.Reset()
	q.Pseudonymise = true
	_, err = b.admin.Org.AuditExport(ctx, q, &buf)
	require.NoError(t, err)
	require.Equal(t, 50, strings.Count(buf.String(), "\n"))
	require.NotContains(t, buf.String(), "user-1")
	var n int
	var last time.Time
	for rec, err := range b.admin.Org.AuditRecords(ctx, q) {
		require.NoError(t, err)
		require.False(t, rec.EndedAt.Before(last), "time order")
		require.Regexp(t, `^u_[0-9a-f]{32}$`, rec.UserID)
		last = rec.EndedAt
		n++
	}
	require.Equal(t, 50, n)

	// A bad bound is the dispatcher's 400 naming it; a dispatch key may not export.
	_, err = b.admin.Org.AuditExport(ctx, client.UsageQuery{From: at, To: at.Add(-time.Hour)}, &buf)
	require.ErrorIs(t, err, client.ErrValidationFailed)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "query.to", ae.FieldErrors()[0].Field)
	for _, err := range b.client(b.create(auth.RoleDispatch)).Org.AuditRecords(ctx, q) {
		require.ErrorIs(t, err, client.ErrForbidden)
	}
}

// TestAuditExportCutShort ends the export's Postgres session in the middle of the stream:
// the client must see an error — the dispatcher's error line, or the cut connection — and
// never a clean end of a partial export.
func TestAuditExportCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 200_000
	testkit.Ledger(t, b.pool, `INSERT INTO usage_ledger (org_id, user_id, job_type, provider, model, tokens_in, tokens_out,
			cost_usd, latency_ms, created_at)
		SELECT $1, 'u', 's', 'openai', 'gpt-4o', 1, 1, 0.1, 1, timestamptz '2026-10-01' + i * interval '1 second'
		FROM generate_series(1, $2) i`, b.orgID, n)
	var rows int
	var last error
	for _, err := range b.admin.Org.AuditRecords(ctx, client.UsageQuery{Month: "2026-10"}) {
		if err != nil {
			last = err
			break
		}
		rows++
		if rows == 1 {
			// The export's query is running (it sent a row); end its session.
			var ended int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%FROM usage_ledger l%'
					AND query LIKE '%l.span_id%'`).Scan(&ended))
			require.Equal(t, 1, ended)
		}
	}
	require.Error(t, last, "a cut export is an error, not a clean end")
	// Its last line says why, the dispatcher having flushed it before cutting the connection.
	require.ErrorIs(t, last, client.ErrDatabaseUnavailable)
	require.Less(t, rows, n)
	t.Logf("after %d rows: %v", rows, last)
}
