-- name: GetChain :one
-- A chain ($1) of an organisation ($2) as the public API shows it, without its steps.
SELECT id, COALESCE(parent_run_id::text, ''), job_type, trace_id, status, definition, input, cost_usd::float8,
	cost_ceiling_usd::float8, COALESCE(rerun_of::text, ''), error, created_at, deadline_at, finished_at
FROM chains WHERE id = $1 AND org_id = $2;
