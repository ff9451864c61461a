-- name: ChainsToRepair :many
-- What the reconciler nudges the coordinator about, each older than $1 seconds: a step run
-- that ended while its chain still counts it dispatched (its report was lost), a running
-- chain past its deadline, and a chain whose parent run is still queued (its start was
-- lost). Kind, chain, run (the step's or the parent's).
SELECT 'step_done', cs.chain_id::text, cs.run_id::text
FROM chain_steps cs JOIN runs r ON r.id = cs.run_id
WHERE cs.status = 'dispatched' AND r.status IN ('completed', 'completed_max_iterations',
	'completed_budget_exhausted', 'failed', 'timed_out', 'cancelled', 'rejected', 'skipped')
  AND r.finished_at < now() - make_interval(secs => $1)
UNION ALL
SELECT 'timeout', c.id::text, COALESCE(c.parent_run_id::text, '') FROM chains c
WHERE c.status = 'running' AND c.deadline_at < now()
UNION ALL
SELECT 'start', c.id::text, r.id::text FROM chains c JOIN runs r ON r.id = c.parent_run_id
WHERE c.status = 'running' AND r.status = 'queued' AND r.updated_at < now() - make_interval(secs => $1)
LIMIT 500;
