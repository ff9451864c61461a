-- name: ListSpans :many
-- The spans of a run ($1) of an organisation ($2), by start; the columns scanSpan reads.
SELECT id, run_id, trace_id, COALESCE(chain_id::text, ''), COALESCE(parent_id::text, ''), attempt,
	type, name, status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out,
	tokens_cached, cost_usd::float8
FROM spans WHERE run_id = $1 AND org_id = $2 ORDER BY started_at, id;
