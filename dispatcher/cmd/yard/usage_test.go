package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestUsageAndAuditExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Ledger(t, b.pool, `INSERT INTO usage_ledger (org_id, user_id, job_type, provider, model,
			tokens_in, tokens_out, cost_usd, latency_ms, created_at)
		SELECT $1, 'user-' || (i % 2), 'skill_' || (i % 3), 'openai', 'gpt-4o', 10, 5, 0.5, 100,
			timestamptz '2026-10-05' + i * interval '1 hour'
		FROM generate_series(0, 29) i`, b.orgID)

	r := b.yard("", "usage", "--from", "2026-10-01", "--to", "2026-11-01")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "30 calls, 450 tokens (300 in, 150 out), $15.000000")
	require.Contains(t, r.stdout, "this month (")
	require.Regexp(t, `(?m)^skill_0\s+10\s+150\s+5\.000000$`, r.stdout)

	r = b.yard("", "usage", "--from", "2026-10-01", "--to", "2026-11-01", "--by", "user", "--users", "1", "--pseudonymise")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^u_[0-9a-f]{32}\s+15\s+225\s+7\.500000$`, r.stdout)
	require.Contains(t, r.stdout, "(1 more users: --users N)")
	require.NotContains(t, r.stdout, "user-")

	r = b.yard("", "usage", "-o", "json", "--month", "2026-10", "--by", "day")
	require.Equal(t, exitOK, r.code, r.stderr)
	var u client.Usage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &u))
	require.Len(t, u.ByDay, 2)

	csvFile := filepath.Join(t.TempDir(), "usage.csv")
	r = b.yard("", "usage", "--month", "2026-10", "--csv", "--out", csvFile)
	require.Equal(t, exitOK, r.code, r.stderr)
	raw, err := os.ReadFile(csvFile)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "day,job_type,provider,model,user_id,"))

	r = b.yard("", "audit", "export", "--from", "2026-10-01", "--to", "2026-11-01", "--pseudonymise")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 30)
	var rec client.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
	require.Equal(t, "skill_0", rec.JobType)
	require.Regexp(t, `^u_[0-9a-f]{32}$`, rec.UserID)

	r = b.yard("", "audit", "export", "--from", "2026-10-02", "--to", "2026-10-01")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "VALIDATION_FAILED")
	require.Contains(t, r.stderr, "query.to")
	r = b.yard("", "usage", "--by", "week")
	require.Equal(t, exitUsage, r.code)
	r = b.yard("", "usage", "--from", "last week")
	require.Equal(t, exitUsage, r.code)
}
