package ledger

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/shared/monthusage"
)

// insertSQL writes a batch of entries in one statement: rows whose call key is already in
// the ledger are skipped — except that an answered entry replaces an unknown one (the
// call's router only stalled past its claim: the call that took its step over recorded
// it as unknown, then its answer came) — and the organisations' monthly counters grow by
// the tokens and the cost of the rows written (an unknown row holds none of either), in
// this statement: a row and its month's counter are written together or not at all, and a
// row already there adds nothing. It returns how many rows it wrote. The answer that
// replaces an unknown row keeps the row's span id when it brings none (both name the same
// call, so they agree when both have one).
const insertSQL = `
WITH ins AS (
    INSERT INTO usage_ledger (call_key, step_key, org_id, user_id, run_id, chain_id, job_type, provider, model,
        tokens_in, tokens_out, tokens_cached, cost_usd, latency_ms, queue_wait_ms, created_at, outcome, span_id)
    SELECT k, s, o::uuid, u, NULLIF(r, '')::uuid, NULLIF(c, '')::uuid, j, p, m, ti, tout, tc, cost, lat, qw, at, oc,
        NULLIF(sp, '')::uuid
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
        $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::float8[], $14::int[], $15::int[],
        $16::timestamptz[], $17::text[], $18::text[]) AS t(k, s, o, u, r, c, j, p, m, ti, tout, tc, cost, lat, qw, at, oc, sp)
    ON CONFLICT (call_key) DO UPDATE SET provider = EXCLUDED.provider, model = EXCLUDED.model,
        tokens_in = EXCLUDED.tokens_in, tokens_out = EXCLUDED.tokens_out, tokens_cached = EXCLUDED.tokens_cached,
        cost_usd = EXCLUDED.cost_usd, latency_ms = EXCLUDED.latency_ms, queue_wait_ms = EXCLUDED.queue_wait_ms,
        outcome = EXCLUDED.outcome, span_id = COALESCE(EXCLUDED.span_id, usage_ledger.span_id)
        WHERE usage_ledger.outcome = 'unknown' AND EXCLUDED.outcome = 'answered'
    ` + monthusage.ReturningSQL + `
), months AS (
    ` + monthusage.AddSQL + `
)
SELECT count(*) FROM ins`

// insert writes entries (distinct call keys) and returns how many were new.
func insert(ctx context.Context, db *pgxpool.Pool, entries []Entry) (int, error) {
	n := len(entries)
	keys, steps, orgs, users, runs, chains := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	jobTypes, providers, models := make([]string, n), make([]string, n), make([]string, n)
	in, out, cached := make([]int64, n), make([]int64, n), make([]int64, n)
	cost, latency, wait, at := make([]float64, n), make([]int32, n), make([]int32, n), make([]time.Time, n)
	outcomes, spans := make([]string, n), make([]string, n)
	for i, e := range entries {
		keys[i], steps[i], orgs[i], users[i], runs[i], chains[i] = e.CallKey, e.StepKey, e.OrgID, e.UserID, e.RunID, e.ChainID
		jobTypes[i], providers[i], models[i] = e.JobType, e.Provider, e.Model
		in[i], out[i], cached[i] = e.TokensIn, e.TokensOut, e.TokensCached
		cost[i], latency[i], wait[i], at[i] = e.CostUSD, int32(e.Latency.Milliseconds()), int32(e.QueueWait.Milliseconds()), e.At
		outcomes[i], spans[i] = cmp.Or(e.Outcome, OutcomeAnswered), e.SpanID
	}
	var inserted int
	err := db.QueryRow(ctx, insertSQL, keys, steps, orgs, users, runs, chains, jobTypes, providers, models,
		in, out, cached, cost, latency, wait, at, outcomes, spans).Scan(&inserted)
	return inserted, err
}

// invalidData reports whether Postgres refused the entries for what they hold (a data
// exception or an integrity violation, SQLSTATE classes 22 and 23) rather than for being
// unreachable: another attempt cannot succeed, so the batch is split to find the entry.
func invalidData(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && len(pe.Code) == 5 && (pe.Code[:2] == "22" || pe.Code[:2] == "23")
}
