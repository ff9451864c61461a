package api_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// ledgerRow is a usage ledger row a test writes.
type ledgerRow struct {
	org, user, run, step, skill, provider, model, outcome string
	span                                                  string // span_id; "": NULL, as rows before 00029
	in, out                                               int64
	cost                                                  float64
	at                                                    time.Time
}

func (b *bundle) ledger(rows ...ledgerRow) {
	b.t.Helper()
	for _, r := range rows {
		if r.outcome == "" {
			r.outcome = "answered"
		}
		testkit.Ledger(b.t, b.pool, `INSERT INTO usage_ledger (org_id, user_id, run_id, step_key, job_type,
			provider, model, tokens_in, tokens_out, cost_usd, latency_ms, created_at, outcome, span_id)
			VALUES ($1, $2, NULLIF($3, '')::uuid, $4, $5, $6, $7, $8, $9, $10, 250, $11, $12, NULLIF($13, '')::uuid)`,
			r.org, r.user, r.run, r.step, r.skill, r.provider, r.model, r.in, r.out, r.cost, r.at, r.outcome, r.span)
	}
}

// otherOrg makes a second organisation with an admin key.
func (b *bundle) otherOrg(slug string) (orgID, key string) {
	b.t.Helper()
	ctx := context.Background()
	orgID, err := bootstrap.EnsureOrg(ctx, b.pool, slug, slug, "eu")
	require.NoError(b.t, err)
	key, _, err = auth.Create(ctx, b.pool, orgID, "admin", []auth.Role{auth.RoleAdmin}, "test")
	require.NoError(b.t, err)
	return orgID, key
}

// open sends a GET with key (and an Accept header when accept is set) and returns the
// answer unread: the caller reads the body as it streams and closes it.
func (b *bundle) open(key, path, accept string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	return resp
}

func (b *bundle) getJSON(key, path string, out any) int {
	b.t.Helper()
	code, body := b.rawDo(key, http.MethodGet, path, "")
	if code == http.StatusOK {
		require.NoError(b.t, json.Unmarshal([]byte(body), out), body)
	}
	return code
}

var day1 = time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)

// usageFixture writes calls of two users, two skills and two providers over two days in
// the bundle's organisation, and one call of the same user id in another organisation.
func usageFixture(b *bundle) (otherKey string) {
	otherID, otherKey := b.otherOrg("globex")
	day2 := day1.Add(24 * time.Hour)
	b.ledger(
		ledgerRow{org: b.orgID, user: "alice", skill: "summarise", provider: "openai", model: "gpt-4o", in: 100, out: 50, cost: 0.5, at: day1},
		ledgerRow{org: b.orgID, user: "alice", skill: "summarise", provider: "openai", model: "gpt-4o", in: 100, out: 50, cost: 0.5, at: day2},
		ledgerRow{org: b.orgID, user: "bob", skill: "classify", provider: "sim-llm", model: "sim-fast", in: 10, out: 5, cost: 0.01, at: day2},
		ledgerRow{org: b.orgID, user: "", skill: "classify", provider: "sim-llm", model: "sim-fast", outcome: "unknown", at: day2},
		// Outside the period, and another organisation's.
		ledgerRow{org: b.orgID, user: "alice", skill: "summarise", provider: "openai", model: "gpt-4o", in: 1, out: 1, cost: 9, at: day1.AddDate(0, 1, 0)},
		ledgerRow{org: otherID, user: "alice", skill: "secret_skill", provider: "openai", model: "gpt-4o", in: 7, out: 7, cost: 7, at: day1},
	)
	return otherKey
}

func TestUsageBreakdowns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	otherKey := usageFixture(b)

	var u apitypes.Usage
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage?from=2026-10-01&to=2026-11-01", &u))
	require.Equal(t, int64(315), u.Tokens)
	require.InDelta(t, 1.01, u.CostUSD, 1e-9)
	require.Equal(t, int64(4), u.Calls)
	require.Equal(t, int64(1), u.UnknownCalls)
	require.Equal(t, "", u.Month)
	require.Equal(t, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), u.From)

	key := func(s []apitypes.UsageShare) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Key)
		}
		return out
	}
	require.Equal(t, []string{"summarise", "classify"}, key(u.BySkill), "top skills, largest cost first")
	require.Equal(t, int64(300), u.BySkill[0].Tokens)
	require.Equal(t, int64(2), u.BySkill[1].Calls)
	require.Equal(t, []string{"openai", "sim-llm"}, key(u.ByProvider))
	require.Equal(t, []string{"openai/gpt-4o", "sim-llm/sim-fast"}, key(u.ByModel))
	require.Equal(t, []string{"alice", "bob", ""}, key(u.ByUser))
	require.Equal(t, int64(3), u.UsersTotal)
	require.Len(t, u.ByDay, 2)
	require.Equal(t, "2026-10-05", u.ByDay[0].Day)
	require.InDelta(t, 0.5, u.ByDay[0].CostUSD, 1e-9)
	require.Equal(t, int64(3), u.ByDay[1].Calls)
	require.Len(t, u.Daily.Skill, 3) // summarise on both days, classify on the second
	require.Equal(t, apitypes.UsagePoint{Day: "2026-10-06", Key: "classify", UsageAmount: apitypes.UsageAmount{
		Tokens: 15, TokensIn: 10, TokensOut: 5, CostUSD: 0.01, Calls: 2, UnknownCalls: 1}}, u.Daily.Skill[1])
	require.Len(t, u.Daily.User, 4)
	require.Len(t, u.Daily.Model, 3)
	require.Len(t, u.Daily.Provider, 3)
	require.Equal(t, []apitypes.SkillUsage{{JobType: "summarise", Model: "gpt-4o", Tokens: 300, CostUSD: 1, Calls: 2},
		{JobType: "classify", Model: "sim-fast", Tokens: 15, CostUSD: 0.01, Calls: 2}}, u.BySkillAndModel)

	// The top users only, with their series.
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage?from=2026-10-01&to=2026-11-01&users=1", &u))
	require.Equal(t, []string{"alice"}, key(u.ByUser))
	require.Equal(t, int64(3), u.UsersTotal)
	require.Len(t, u.Daily.User, 2)

	// month= is the calendar month; the current month is there whatever the period.
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage?month=2026-11", &u))
	require.Equal(t, "2026-11", u.Month)
	require.InDelta(t, 9.0, u.CostUSD, 1e-9)
	require.Equal(t, time.Now().UTC().Format("2006-01"), u.ThisMonth.Month)

	// The organisation's monthly cost budget, once an operator has set one.
	require.Nil(t, u.ThisMonth.MonthlyBudgetUSD)
	_, err := b.pool.Exec(context.Background(), `UPDATE orgs SET monthly_cost_budget_usd = 50 WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage", &u))
	require.NotNil(t, u.ThisMonth.MonthlyBudgetUSD)
	require.Equal(t, 50.0, *u.ThisMonth.MonthlyBudgetUSD)

	// The other organisation sees its own call only.
	require.Equal(t, http.StatusOK, b.getJSON(otherKey, "/api/v1/admin/usage?from=2026-10-01&to=2026-11-01", &u))
	require.Equal(t, []string{"secret_skill"}, key(u.BySkill))
	require.Equal(t, int64(14), u.Tokens)
	require.Equal(t, []string{"alice"}, key(u.ByUser))
}

func TestUsagePseudonymised(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	otherKey := usageFixture(b)
	const q = "/api/v1/admin/usage?from=2026-10-01&to=2026-11-01&pseudonymise=true"
	var u, again, other apitypes.Usage
	require.Equal(t, http.StatusOK, b.getJSON(admin, q, &u))
	require.True(t, u.Pseudonymised)
	require.Len(t, u.ByUser, 3)
	alice := u.ByUser[0].Key
	require.Regexp(t, `^u_[0-9a-f]{32}$`, alice)
	require.Equal(t, "", u.ByUser[2].Key, "a call without a user stays without one")
	require.Equal(t, alice, u.Daily.User[0].Key)
	require.Equal(t, http.StatusOK, b.getJSON(admin, q, &again))
	require.Equal(t, alice, again.ByUser[0].Key, "stable")
	require.Equal(t, http.StatusOK, b.getJSON(otherKey, q, &other))
	require.NotEqual(t, alice, other.ByUser[0].Key, "another organisation's key gives another pseudonym")
	_, raw := b.rawDo(admin, http.MethodGet, q, "")
	require.NotContains(t, raw, "alice")
	require.NotContains(t, raw, `"bob"`)
}

func TestUsageValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	for q, field := range map[string]string{
		"from=yesterday":                         "query.from",
		"to=2026-13-01":                          "query.to",
		"from=2026-10-02&to=2026-10-01":          "query.to",
		"from=2026-10-01&to=2026-10-01":          "query.to",
		"from=2025-01-01&to=2026-10-01":          "query.to",
		"month=2026-10&from=2026-10-01":          "query.month",
		"month=10-2026":                          "query.month",
		"format=xml":                             "query.format",
		"users=0":                                "query.users",
		"users=many":                             "query.users",
		"pseudonymise=perhaps":                   "query.pseudonymise",
		"from=2026-10-01T00:00:00&to=2026-11-01": "query.from",
	} {
		code, res := b.do(admin, http.MethodGet, "/api/v1/admin/usage?"+q, "")
		require.Equal(t, http.StatusBadRequest, code, q)
		require.Equal(t, "VALIDATION_FAILED", res["code"], q)
		f := res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)
		require.Equal(t, field, f["field"], q)
	}
	// The audit export checks its bounds the same way (and has no 366-day limit).
	code, res := b.do(admin, http.MethodGet, "/api/v1/admin/audit?from=2026-10-02&to=2026-10-01", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "query.to", res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)["field"])
	code, _ = b.do(admin, http.MethodGet, "/api/v1/admin/audit?from=2020-01-01&to=2026-10-01", "")
	require.Equal(t, http.StatusOK, code)
	// Admin only.
	code, _ = b.do(b.key, http.MethodGet, "/api/v1/admin/audit", "")
	require.Equal(t, http.StatusForbidden, code)
}

func TestUsageCSV(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	usageFixture(b)
	b.ledger(ledgerRow{org: b.orgID, user: "=HYPERLINK(\"http://x\")", skill: "classify", provider: "sim-llm", model: "sim-fast", in: 1, at: day1})
	for _, how := range []struct{ query, accept string }{{"&format=csv", ""}, {"", "text/csv"}} {
		resp := b.open(admin, "/api/v1/admin/usage?from=2026-10-01&to=2026-11-01"+how.query, how.accept)
		recs, err := csv.NewReader(resp.Body).ReadAll()
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Equal(t, `attachment; filename=usage-20261001T000000Z-20261101T000000Z.csv`, resp.Header.Get("Content-Disposition"))
		require.Equal(t, []string{"day", "job_type", "provider", "model", "user_id", "tokens_in", "tokens_out",
			"tokens_cached", "tokens", "cost_usd", "calls", "unknown_calls"}, recs[0])
		require.Equal(t, [][]string{
			{"2026-10-05", "classify", "sim-llm", "sim-fast", `'=HYPERLINK("http://x")`, "1", "0", "0", "1", "0", "1", "0"},
			{"2026-10-05", "summarise", "openai", "gpt-4o", "alice", "100", "50", "0", "150", "0.5", "1", "0"},
			{"2026-10-06", "classify", "sim-llm", "sim-fast", "", "0", "0", "0", "0", "0", "1", "1"},
			{"2026-10-06", "classify", "sim-llm", "sim-fast", "bob", "10", "5", "0", "15", "0.01", "1", "0"},
			{"2026-10-06", "summarise", "openai", "gpt-4o", "alice", "100", "50", "0", "150", "0.5", "1", "0"},
		}, recs[1:], "one row per day, skill, provider, model and user; no other organisation's")
	}
	// An empty period is the header alone.
	_, body := b.rawDo(admin, http.MethodGet, "/api/v1/admin/usage?from=2020-01-01&to=2020-02-01&format=csv", "")
	require.Equal(t, "day,job_type,provider,model,user_id,tokens_in,tokens_out,tokens_cached,tokens,cost_usd,calls,unknown_calls\n", body)
}

func TestAuditExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	ctx := context.Background()
	otherID, otherKey := b.otherOrg("initech")
	code, res := b.dispatch(`{"job_type":"demo_llm","user_id":"carol","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	jobID := res["jobId"].(string)
	// The run's llm_call spans: a dead attempt's (abandoned) and the answered one of step llm/1.
	// Step llm/2 has two answered spans: the call's own, and a later one (an attempt whose
	// call the router answered again from the first answer).
	span := func(step, status string, ago time.Duration) string {
		var id string
		require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO spans (id, run_id, org_id, trace_id, type, name, status, started_at, attributes)
			SELECT gen_random_uuid(), id, org_id, trace_id, 'llm_call', 'llm ' || $2, $3, now() - $4::interval, jsonb_build_object('step', $2::text)
			FROM runs WHERE id = $1 RETURNING id::text`, jobID, step, status, ago.String()).Scan(&id))
		return id
	}
	spanDead, spanOK := span("llm/1", "abandoned", 0), span("llm/1", "ok", 0)
	spanPaid, spanReplayed := span("llm/2", "ok", time.Minute), span("llm/2", "ok", 0)
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	b.ledger(
		ledgerRow{org: b.orgID, user: "carol", run: jobID, step: "llm/1", skill: "demo_llm", provider: "sim-llm", model: "sim-fast", outcome: "unknown", at: t0},
		ledgerRow{org: b.orgID, user: "carol", run: jobID, step: "llm/1", skill: "demo_llm", provider: "sim-llm", model: "sim-fast", in: 12, out: 3, cost: 0.002, at: t0.Add(time.Second)},
		ledgerRow{org: b.orgID, user: "", skill: "", provider: "openai", model: "gpt-4o-mini", in: 1, out: 1, cost: 0.0001, at: t0.Add(2 * time.Second)},
		ledgerRow{org: otherID, user: "carol", skill: "theirs", provider: "openai", model: "gpt-4o", in: 5, out: 5, cost: 1, at: t0},
		// Rows the router wrote with the call's span id (X-Span-ID, migration 00029).
		ledgerRow{org: b.orgID, user: "carol", run: jobID, step: "llm/1", skill: "demo_llm", provider: "sim-llm", model: "sim-fast", in: 12, out: 3, cost: 0.002, at: t0.Add(3 * time.Second), span: spanOK},
		ledgerRow{org: b.orgID, user: "carol", run: jobID, step: "llm/2", skill: "demo_llm", provider: "sim-llm", model: "sim-fast", in: 1, out: 1, cost: 0.001, at: t0.Add(4 * time.Second), span: spanPaid},
		ledgerRow{org: b.orgID, user: "carol", run: jobID, step: "llm/2", skill: "demo_llm", provider: "sim-llm", model: "sim-fast", in: 1, out: 1, cost: 0.001, at: t0.Add(5 * time.Second)},
	)
	read := func(key, q string) []apitypes.AuditRecord {
		resp := b.open(key, "/api/v1/admin/audit?"+q, "")
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
		var out []apitypes.AuditRecord
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var r apitypes.AuditRecord
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&r), sc.Text())
			out = append(out, r)
		}
		require.NoError(t, sc.Err())
		return out
	}
	from := t0.Add(-time.Hour).Format(time.RFC3339)
	recs := read(admin, "from="+from)
	require.Len(t, recs, 6)
	require.Equal(t, "unknown", recs[0].Outcome)
	require.Equal(t, spanDead, recs[0].SpanID, "an unknown call points at the attempt that never finished")
	require.Equal(t, apitypes.AuditRecord{ID: recs[1].ID, OrgID: b.orgID, UserID: "carol", JobID: jobID, JobType: "demo_llm",
		SpanID: spanOK, StepKey: "llm/1", Provider: "sim-llm", Model: "sim-fast", Outcome: "answered", TokensIn: 12, TokensOut: 3,
		CostUSD: 0.002, StartedAt: t0.Add(time.Second - 250*time.Millisecond), EndedAt: t0.Add(time.Second), LatencyMS: 250}, recs[1])
	require.Equal(t, "", recs[2].SpanID)
	require.Equal(t, "", recs[2].JobID)
	// A row with its span id answers the record a row without one does.
	same := recs[1]
	same.ID, same.StartedAt, same.EndedAt = recs[3].ID, recs[1].StartedAt.Add(2*time.Second), recs[1].EndedAt.Add(2*time.Second)
	require.Equal(t, same, recs[3])
	require.Equal(t, spanPaid, recs[4].SpanID, "the row's span id, not the run's latest span of the step")
	require.Equal(t, spanReplayed, recs[5].SpanID, "without a span id: the step's latest answered span, as before")

	// Pseudonymised: the same pseudonym as the usage report's, never the id.
	p := read(admin, "pseudonymise=true&from="+from)
	require.Regexp(t, `^u_[0-9a-f]{32}$`, p[0].UserID)
	require.Equal(t, p[0].UserID, p[1].UserID)
	require.Equal(t, "", p[2].UserID)
	var u apitypes.Usage
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage?pseudonymise=true&from="+from, &u))
	require.Equal(t, p[0].UserID, u.ByUser[0].Key)

	// The other organisation's export has its own call only; a period before is empty.
	o := read(otherKey, "from="+from)
	require.Len(t, o, 1)
	require.Equal(t, "theirs", o[0].JobType)
	require.Empty(t, read(admin, "from=2020-01-01&to=2020-02-01"))
}

// TestAuditExportStreams exports more rows than the dispatcher could hold without its
// heap showing it (about 110 MB of JSON) and checks that its heap stays far below that
// while the rows arrive, and that the first line arrives before the last row was read.
func TestAuditExportStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 250,000 ledger rows")
	}
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	const n = 250_000
	testkit.Ledger(t, b.pool, `INSERT INTO usage_ledger (org_id, user_id, job_type, provider, model,
			tokens_in, tokens_out, cost_usd, latency_ms, created_at)
		SELECT $1, 'user-' || (i % 97), 'skill_' || (i % 7), 'openai', 'gpt-4o', i % 1000, i % 300, 0.0001 * (i % 50), 120,
			timestamptz '2026-10-01' + i * interval '1 second'
		FROM generate_series(1, $2) i`, b.orgID, n)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	})

	resp := b.open(admin, "/api/v1/admin/audit?from=2026-10-01&to=2026-11-01&pseudonymise=true", "")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Content-Length"), "streamed, so its length is not known up front")
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	var lines, size int64
	var last apitypes.AuditRecord
	for {
		line, err := r.ReadSlice('\n')
		if err == io.EOF {
			require.Empty(t, line)
			break
		}
		require.NoError(t, err)
		lines++
		size += int64(len(line))
		if lines == n {
			require.NoError(t, json.Unmarshal(line, &last))
		}
	}
	close(stop)
	wg.Wait()
	require.Equal(t, int64(n), lines)
	require.Equal(t, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(n*time.Second), last.EndedAt, "in time order")
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("exported %d rows, %d MB; the heap grew by at most %d MB", lines, size>>20, grew>>20)
	require.Greater(t, size, int64(64<<20))
	require.Less(t, grew, size/4, "the export is not held in memory")
}

// The monthly cost budget is checked against the month's counter (org_monthly_usage), which
// the ledger's writer keeps with the rows: this month's rows reaching the budget refuse
// dispatching with 429 COST_BUDGET_EXCEEDED, the spent figure the counter's, while the
// month before, however dear, does not count; with the counter put back to 0 dispatching
// goes on, though the rows are still there (the check reads the one row, not the ledger).
func TestCostBudgetIsCheckedAgainstTheMonthsCounter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	admin := b.newKey(auth.RoleAdmin)
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	_, err := b.pool.Exec(ctx, `UPDATE orgs SET monthly_cost_budget_usd = 5 WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	row := ledgerRow{org: b.orgID, skill: "demo_llm", provider: "sim-llm", model: "sim-fast", in: 10, out: 5}
	last, first, more := row, row, row
	last.cost, last.at = 100, month.Add(-time.Millisecond)
	first.cost, first.at = 4.25, month
	more.cost, more.at = 0.75, now
	b.ledger(last, first)

	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "4.25 of 5 spent: %v", res)

	b.ledger(more)
	waitFor(t, func() bool {
		code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
		return code == http.StatusTooManyRequests
	}, "the budget to refuse")
	requireCode(t, http.StatusTooManyRequests, "COST_BUDGET_EXCEEDED", code, res)
	c := res["context"].(map[string]any)
	require.InDelta(t, 5.0, c["spent_usd"], 1e-9)
	require.InDelta(t, 5.0, c["budget_usd"], 1e-9)
	var u apitypes.Usage
	require.Equal(t, http.StatusOK, b.getJSON(admin, "/api/v1/admin/usage", &u))
	require.InDelta(t, 5.0, u.ThisMonth.CostUSD, 1e-9)

	_, err = b.pool.Exec(ctx, `UPDATE org_monthly_usage SET cost_usd = 0 WHERE org_id = $1 AND month = $2`, b.orgID, month)
	require.NoError(t, err)
	waitFor(t, func() bool {
		code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
		return code == http.StatusAccepted
	}, "the counter's 0 to let dispatching go on")
}
