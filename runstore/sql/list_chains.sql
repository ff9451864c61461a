-- name: ListChains :many
-- An organisation's ($1) chains, newest first: status ($2, '': any), job type ($3, '': any),
-- the keyset cursor ($4, $5: chains created before it) and the limit ($6).
SELECT c.id, COALESCE(c.parent_run_id::text, ''), c.job_type, c.status, c.definition, c.cost_usd::float8,
	COALESCE(c.rerun_of::text, ''), c.created_at, c.finished_at,
	(SELECT count(*) FROM chain_steps s WHERE s.chain_id = c.id AND s.instance = -1
		AND s.status IN ('completed', 'failed', 'skipped', 'cancelled'))
FROM chains c
WHERE c.org_id = $1 AND ($2 = '' OR c.status = $2) AND ($3 = '' OR c.job_type = $3)
  AND ($4::timestamptz IS NULL OR (c.created_at, c.id) < ($4, $5::uuid))
ORDER BY c.created_at DESC, c.id DESC LIMIT $6;
