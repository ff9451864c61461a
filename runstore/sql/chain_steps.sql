-- name: ChainSteps :many
-- The step rows of a chain ($1) with their runs' live status, in step order.
SELECT cs.step_id, cs.instance, cs.status, COALESCE(cs.run_id::text, ''), cs.attempt, cs.instances,
	cs.reason, cs.reused, COALESCE(cs.span_id::text, ''), cs.output, cs.error, cs.cost_usd::float8,
	COALESCE(r.status, ''), cs.started_at, cs.finished_at, COALESCE(r.job_type, '')
FROM chain_steps cs LEFT JOIN runs r ON r.id = cs.run_id
WHERE cs.chain_id = $1
ORDER BY cs.step_id, cs.instance;
