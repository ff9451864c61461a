-- name: LoadWork :one
-- A run as a worker reads it ($1: run id); the columns scanWork reads.
SELECT r.id, r.org_id, r.trace_id, r.job_type, r.status, r.priority, r.queue, r.user_id,
	r.execution_type, r.payload, r.skill_version, r.chain_id::text, r.chain_step, r.cost_ceiling_usd::float8,
	r.attempts, r.queued_at, r.cancel_requested_at IS NOT NULL, r.deadline_at, r.waiting_since, r.started_at
FROM runs r WHERE id = $1;
