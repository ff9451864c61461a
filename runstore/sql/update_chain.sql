-- name: UpdateChain :exec
-- A chain's ($1) status, error and cost after a transition; finished_at once it has ended.
UPDATE chains SET status = $2, error = $3, cost_usd = $4, updated_at = now(),
	finished_at = CASE WHEN $2 <> 'running' THEN COALESCE(finished_at, now()) END
WHERE id = $1;
