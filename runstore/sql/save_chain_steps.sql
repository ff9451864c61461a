-- name: SaveChainSteps :exec
-- Inserts or updates step rows of a chain ($1), column by column.
INSERT INTO chain_steps (chain_id, step_id, instance, status, run_id, attempt, instances, reason, reused,
	span_id, output, error, cost_usd, started_at, finished_at)
SELECT $1, s.step_id, s.instance, s.status, s.run_id::uuid, s.attempt, s.instances, s.reason, s.reused,
	s.span_id::uuid, s.output, s.error, s.cost_usd, s.started_at, s.finished_at
FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::int[], $7::int[], $8::text[], $9::bool[],
	$10::text[], $11::jsonb[], $12::jsonb[], $13::numeric[], $14::timestamptz[], $15::timestamptz[])
	AS s(step_id, instance, status, run_id, attempt, instances, reason, reused, span_id, output, error,
		cost_usd, started_at, finished_at)
ON CONFLICT (chain_id, step_id, instance) DO UPDATE SET status = EXCLUDED.status, run_id = EXCLUDED.run_id,
	attempt = EXCLUDED.attempt, instances = EXCLUDED.instances, reason = EXCLUDED.reason,
	reused = EXCLUDED.reused, span_id = EXCLUDED.span_id, output = EXCLUDED.output, error = EXCLUDED.error,
	cost_usd = EXCLUDED.cost_usd, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at;
