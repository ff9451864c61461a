package store

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// The usage ledger (usage_ledger) is written by the provider router's ledger package, one
// row per paid provider call; the dispatcher only reads it, here, always within one
// organisation and a period [from, to) of created_at — the index usage_ledger_org_month_idx
// (org_id, created_at) serves every query below.

// UsageReport holds the breakdowns of a period that Usage fills (apitypes.Usage without
// the organisation's settings).
type UsageReport = apitypes.Usage

// Bits of GROUPING(day, job_type, provider, model, user_id): a set bit is a column the row
// is NOT grouped by.
const (
	gDay = 1 << (4 - iota)
	gSkill
	gProvider
	gModel
	gUser
	gAll = gDay | gSkill | gProvider | gModel | gUser
)

// UsageSQL computes every breakdown in one scan of the period's rows (GROUPING SETS): $1
// the organisation, [$2, $3) the period. Exported for the benchmark's plans and baseline.
const UsageSQL = `
SELECT GROUPING(day, job_type, provider, model, user_id), COALESCE(day::text, ''), COALESCE(job_type, ''),
    COALESCE(provider, ''), COALESCE(model, ''), COALESCE(user_id, ''),
    COALESCE(sum(tokens_in), 0)::bigint, COALESCE(sum(tokens_out), 0)::bigint,
    COALESCE(sum(tokens_cached), 0)::bigint, COALESCE(sum(cost_usd), 0)::float8,
    count(*), count(*) FILTER (WHERE outcome = 'unknown')
FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, job_type, provider, model, user_id,
        tokens_in, tokens_out, tokens_cached, cost_usd, outcome
    FROM usage_ledger WHERE org_id = $1 AND created_at >= $2 AND created_at < $3) l
GROUP BY GROUPING SETS ((), (day), (job_type), (provider), (provider, model), (user_id), (job_type, model),
    (day, job_type), (day, provider), (day, provider, model), (day, user_id))`

// Usage returns what the organisation's LLM calls consumed in [from, to): totals, by day,
// skill, provider, model (and skill and model), and the users of largest cost (at most
// users of them, with their daily series), each user id passed through pseud.
func Usage(ctx context.Context, db DB, orgID string, from, to time.Time, users int, pseud func(string) string) (UsageReport, error) {
	rows, err := db.Query(ctx, UsageSQL, orgID, from, to)
	if err != nil {
		return UsageReport{}, fmt.Errorf("reading usage: %w", err)
	}
	defer rows.Close()
	r := UsageReport{From: from, To: to, BySkillAndModel: []apitypes.SkillUsage{}, ByDay: []apitypes.UsagePoint{},
		BySkill: []apitypes.UsageShare{}, ByProvider: []apitypes.UsageShare{}, ByModel: []apitypes.UsageShare{},
		ByUser: []apitypes.UsageShare{}, Daily: apitypes.UsageDaily{Skill: []apitypes.UsagePoint{},
			Provider: []apitypes.UsagePoint{}, Model: []apitypes.UsagePoint{}, User: []apitypes.UsagePoint{}}}
	var dailyUsers []apitypes.UsagePoint
	for rows.Next() {
		var g int
		var day, skill, provider, model, user string
		var a apitypes.UsageAmount
		if err := rows.Scan(&g, &day, &skill, &provider, &model, &user, &a.TokensIn, &a.TokensOut, &a.TokensCached,
			&a.CostUSD, &a.Calls, &a.UnknownCalls); err != nil {
			return UsageReport{}, fmt.Errorf("reading usage: %w", err)
		}
		a.Tokens = a.TokensIn + a.TokensOut
		pm := provider + "/" + model
		switch gAll &^ g { // the columns grouped by
		case 0:
			r.Tokens, r.TokensIn, r.TokensOut, r.TokensCached = a.Tokens, a.TokensIn, a.TokensOut, a.TokensCached
			r.CostUSD, r.Calls, r.UnknownCalls = a.CostUSD, a.Calls, a.UnknownCalls
		case gDay:
			r.ByDay = append(r.ByDay, apitypes.UsagePoint{Day: day, UsageAmount: a})
		case gSkill:
			r.BySkill = append(r.BySkill, apitypes.UsageShare{Key: skill, UsageAmount: a})
		case gProvider:
			r.ByProvider = append(r.ByProvider, apitypes.UsageShare{Key: provider, UsageAmount: a})
		case gProvider | gModel:
			r.ByModel = append(r.ByModel, apitypes.UsageShare{Key: pm, UsageAmount: a})
		case gUser:
			r.ByUser = append(r.ByUser, apitypes.UsageShare{Key: user, UsageAmount: a})
		case gSkill | gModel:
			r.BySkillAndModel = append(r.BySkillAndModel, apitypes.SkillUsage{JobType: skill, Model: model,
				Tokens: a.Tokens, CostUSD: a.CostUSD, Calls: a.Calls})
		case gDay | gSkill:
			r.Daily.Skill = append(r.Daily.Skill, apitypes.UsagePoint{Day: day, Key: skill, UsageAmount: a})
		case gDay | gProvider:
			r.Daily.Provider = append(r.Daily.Provider, apitypes.UsagePoint{Day: day, Key: provider, UsageAmount: a})
		case gDay | gProvider | gModel:
			r.Daily.Model = append(r.Daily.Model, apitypes.UsagePoint{Day: day, Key: pm, UsageAmount: a})
		case gDay | gUser:
			dailyUsers = append(dailyUsers, apitypes.UsagePoint{Day: day, Key: user, UsageAmount: a})
		}
	}
	if err := rows.Err(); err != nil {
		return UsageReport{}, fmt.Errorf("reading usage: %w", err)
	}
	for _, s := range [][]apitypes.UsageShare{r.BySkill, r.ByProvider, r.ByModel, r.ByUser} {
		slices.SortFunc(s, func(a, b apitypes.UsageShare) int {
			return largestFirst(a.CostUSD, b.CostUSD, a.Tokens, b.Tokens, a.Key, b.Key)
		})
	}
	slices.SortFunc(r.BySkillAndModel, func(a, b apitypes.SkillUsage) int {
		return largestFirst(a.CostUSD, b.CostUSD, a.Tokens, b.Tokens, a.JobType+"\x00"+a.Model, b.JobType+"\x00"+b.Model)
	})
	for _, s := range [][]apitypes.UsagePoint{r.ByDay, r.Daily.Skill, r.Daily.Provider, r.Daily.Model, dailyUsers} {
		slices.SortFunc(s, func(a, b apitypes.UsagePoint) int {
			return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Key, b.Key))
		})
	}
	r.UsersTotal = int64(len(r.ByUser))
	if len(r.ByUser) > users {
		r.ByUser = r.ByUser[:users]
	}
	top := make(map[string]bool, len(r.ByUser))
	for i := range r.ByUser {
		top[r.ByUser[i].Key] = true
		r.ByUser[i].Key = pseud(r.ByUser[i].Key)
	}
	for _, p := range dailyUsers {
		if top[p.Key] {
			p.Key = pseud(p.Key)
			r.Daily.User = append(r.Daily.User, p)
		}
	}
	return r, nil
}

// largestFirst orders by cost, then tokens, largest first, then by key.
func largestFirst(costA, costB float64, tokA, tokB int64, keyA, keyB string) int {
	return cmp.Or(cmp.Compare(costB, costA), cmp.Compare(tokB, tokA), cmp.Compare(keyA, keyB))
}

// UsageRow is what the calls of one day, skill, provider, model and user consumed: the
// finest grain of the usage report, one line of its CSV.
type UsageRow struct {
	Day, JobType, Provider, Model, UserID string
	apitypes.UsageAmount
}

// UsageRows calls fn with the rows of [from, to) in order of day, skill, provider, model
// and user, as Postgres sends them (nothing is collected).
func UsageRows(ctx context.Context, db DB, orgID string, from, to time.Time, fn func(*UsageRow) error) error {
	rows, err := db.Query(ctx, `SELECT (created_at AT TIME ZONE 'UTC')::date::text AS day, job_type, provider, model, user_id,
		sum(tokens_in)::bigint, sum(tokens_out)::bigint, sum(tokens_cached)::bigint, sum(cost_usd)::float8,
		count(*), count(*) FILTER (WHERE outcome = 'unknown')
		FROM usage_ledger WHERE org_id = $1 AND created_at >= $2 AND created_at < $3
		GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5`, orgID, from, to)
	if err != nil {
		return fmt.Errorf("reading usage: %w", err)
	}
	defer rows.Close()
	var r UsageRow
	for rows.Next() {
		if err := rows.Scan(&r.Day, &r.JobType, &r.Provider, &r.Model, &r.UserID, &r.TokensIn, &r.TokensOut,
			&r.TokensCached, &r.CostUSD, &r.Calls, &r.UnknownCalls); err != nil {
			return fmt.Errorf("reading usage: %w", err)
		}
		r.Tokens = r.TokensIn + r.TokensOut
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading usage: %w", err)
	}
	return nil
}

// AuditRecord is one LLM call of the audit export.
type AuditRecord = apitypes.AuditRecord

// AuditSQL reads the period's calls in time order from usage_ledger_org_month_idx (no sort
// of the whole period: an incremental sort orders the few rows of one instant by id), each
// with the llm_call span it was made under: the row's span_id, which the provider router
// records from the executor's X-Span-ID. A row without one (written before migration 00029)
// has its span looked up as before, through spans_run_idx: the llm_call span of its run and
// step — the one that was answered for an answered call, the one an attempt left unfinished
// for an unknown one. COALESCE runs that subquery only for such rows.
// $1 the organisation, [$2, $3) the period. Exported for the benchmark's plans and baseline.
const AuditSQL = `
SELECT l.id, l.org_id::text, l.user_id, COALESCE(l.run_id::text, ''), COALESCE(l.chain_id::text, ''), l.job_type,
    COALESCE(COALESCE(l.span_id, (
        SELECT sp.id FROM spans sp
        WHERE l.step_key <> '' AND sp.run_id = l.run_id AND sp.type = 'llm_call' AND sp.attributes ->> 'step' = l.step_key
        ORDER BY (sp.status = 'ok') = (l.outcome = 'answered') DESC, sp.started_at DESC
        LIMIT 1
    ))::text, ''),
    l.step_key, l.provider, l.model, l.outcome, l.tokens_in, l.tokens_out, l.tokens_cached,
    l.cost_usd::float8, l.created_at, l.latency_ms, l.queue_wait_ms
FROM usage_ledger l
WHERE l.org_id = $1 AND l.created_at >= $2 AND l.created_at < $3
ORDER BY l.created_at, l.id`

// AuditRecords calls fn with each LLM call of [from, to) in time order, as Postgres sends
// them: rows are read from the connection one at a time, so memory does not grow with the
// period (Postgres waits while the client's socket is full). The record passed to fn is
// reused for the next row.
func AuditRecords(ctx context.Context, db DB, orgID string, from, to time.Time, fn func(*AuditRecord) error) error {
	rows, err := db.Query(ctx, AuditSQL, orgID, from, to)
	if err != nil {
		return fmt.Errorf("reading the audit records: %w", err)
	}
	defer rows.Close()
	var r AuditRecord
	for rows.Next() {
		if err := rows.Scan(&r.ID, &r.OrgID, &r.UserID, &r.JobID, &r.ChainID, &r.JobType, &r.SpanID, &r.StepKey,
			&r.Provider, &r.Model, &r.Outcome, &r.TokensIn, &r.TokensOut, &r.TokensCached, &r.CostUSD, &r.EndedAt,
			&r.LatencyMS, &r.QueueWaitMS); err != nil {
			return fmt.Errorf("reading the audit records: %w", err)
		}
		r.EndedAt = r.EndedAt.UTC()
		r.StartedAt = r.EndedAt.Add(-time.Duration(r.LatencyMS) * time.Millisecond)
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the audit records: %w", err)
	}
	return nil
}

// Pseudonymiser returns the organisation's user-id pseudonym function: HMAC-SHA-256 keyed
// with the organisation's own pseudonym key (org_pseudonym_keys, 32 random bytes made on
// first use and never shown), the first 16 bytes in hex after "u_". The same user id
// gives the same pseudonym in every export of the organisation and a different one in
// another organisation's; without the key it cannot be reversed, nor checked against a
// guessed id. An empty user id (a call without a user) stays empty.
func Pseudonymiser(ctx context.Context, db DB, orgID string) (func(string) string, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("making a pseudonym key: %w", err)
	}
	var key []byte
	var err error
	// Insert-or-read in one statement; concurrent first uses agree on the row that won. A
	// row a concurrent first use committed after this statement's snapshot conflicts yet is
	// not seen: the second try sees it.
	for try := 0; try < 2; try++ {
		err = db.QueryRow(ctx, `WITH ins AS (
				INSERT INTO org_pseudonym_keys (org_id, key) VALUES ($1, $2) ON CONFLICT (org_id) DO NOTHING RETURNING key)
			SELECT key FROM ins UNION ALL SELECT key FROM org_pseudonym_keys WHERE org_id = $1 LIMIT 1`, orgID, fresh).Scan(&key)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pseudonym key: %w", err)
	}
	cache := map[string]string{}
	return func(user string) string {
		if user == "" {
			return ""
		}
		if p, ok := cache[user]; ok {
			return p
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(user))
		p := "u_" + hex.EncodeToString(m.Sum(nil)[:16])
		if len(cache) < 100_000 {
			cache[user] = p
		}
		return p
	}, nil
}
