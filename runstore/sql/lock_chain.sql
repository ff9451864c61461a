-- name: LockChain :one
-- Takes the chain's ($1) advisory transaction lock — every transition of a chain holds it,
-- so they apply one at a time — and reads the chain.
SELECT c.id, c.org_id, c.trace_id, c.job_type, c.status, c.definition, c.input, c.user_id, c.priority,
	COALESCE(c.parent_run_id::text, ''), c.created_at, c.deadline_at, c.error, c.cost_usd::float8,
	COALESCE(c.rerun_of::text, '')
FROM (SELECT pg_advisory_xact_lock(1398358856, hashtext($1::text))) l, chains c
WHERE c.id = $1::uuid;
