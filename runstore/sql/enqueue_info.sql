-- name: EnqueueInfo :one
-- A run's ($1) queue settings from its skill snapshot and its queue. The snapshot is the
-- stored one the run references, or the copy a run recorded before migration 00013
-- carries inline.
SELECT r.id, r.org_id, r.queue, r.priority, r.execution_type, COALESCE(r.chain_id::text, ''),
	COALESCE((COALESCE(s.snapshot, r.skill_snapshot)->>'timeout_seconds')::int, q.timeout_seconds),
	COALESCE((COALESCE(s.snapshot, r.skill_snapshot)->>'max_retries')::int, 3)
FROM runs r JOIN queues q ON q.name = r.queue
LEFT JOIN skill_snapshots s ON s.digest = r.skill_snapshot_digest
WHERE r.id = $1;
