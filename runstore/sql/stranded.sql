-- name: Stranded :many
-- Live runs not updated for $1 seconds, oldest first (the reconciler's scan). The partial
-- index runs_live_idx serves it, so a scan reads only live runs, never the finished history.
-- A chain's parent run has no task: the coordinator runs it (ChainsToRepair).
SELECT id, queue, priority, status FROM runs
WHERE status IN ('queued', 'running') AND execution_type <> 'chain' AND updated_at < now() - make_interval(secs => $1)
ORDER BY updated_at LIMIT 500;
