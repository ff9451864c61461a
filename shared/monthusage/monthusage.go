// Package monthusage holds how a usage_ledger row counts in its organisation's month
// (org_monthly_usage): the one statement the provider router's ledger mover and the tests
// that seed the ledger both write the counters with.
package monthusage

// ReturningSQL is what an INSERT INTO usage_ledger returns for AddSQL: each written row's
// organisation, time, tokens and cost.
const ReturningSQL = `RETURNING org_id, created_at, tokens_in + tokens_out AS tokens, cost_usd`

// AddSQL adds the rows of a preceding common table expression named ins (an INSERT INTO
// usage_ledger … ReturningSQL) to their organisations' counters of the calendar month
// (UTC) of their created_at: tokens and cost, in the same statement, so a row is counted
// exactly when it is written.
const AddSQL = `INSERT INTO org_monthly_usage (org_id, month, tokens, cost_usd)
    SELECT org_id, date_trunc('month', created_at AT TIME ZONE 'UTC')::date, sum(tokens), sum(cost_usd)
    FROM ins GROUP BY 1, 2
    ON CONFLICT (org_id, month) DO UPDATE SET tokens = org_monthly_usage.tokens + EXCLUDED.tokens,
        cost_usd = org_monthly_usage.cost_usd + EXCLUDED.cost_usd`
