-- name: UnfinishedRuns :many
-- The organisation's ($1) runs that have not ended — held for review, queued, running or
-- paused for approval — oldest first, chains' parent runs before every other run (cancelling
-- a parent cancels its chain's steps).
SELECT id::text FROM runs
WHERE org_id = $1 AND status IN ('held_for_review', 'queued', 'running', 'pending_review')
ORDER BY (chain_id IS NOT NULL AND COALESCE(chain_step, '') = '' AND execution_type = 'chain') DESC, created_at;
