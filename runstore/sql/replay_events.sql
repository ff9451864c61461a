-- name: ReplayEvents :many
-- The run's events ($1 run id, $2 org id) after seq $3, in order.
SELECT type, run_id, org_id, seq, ts, data FROM run_events
WHERE run_id = $1 AND org_id = $2 AND seq > $3 ORDER BY seq;
