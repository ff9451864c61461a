-- name: LiveRuns :one
-- The organisation's ($1) runs queued or running, counted up to $2: a backlog check needs
-- to know whether the cap is reached, not by how much.
SELECT count(*) FROM (SELECT 1 FROM runs
	WHERE org_id = $1 AND status IN ('queued', 'running') LIMIT $2) l;
