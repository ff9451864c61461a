-- name: LastEventData :one
-- The data of the run's ($1) latest event of type $2.
SELECT data FROM run_events WHERE run_id = $1 AND type = $2 ORDER BY seq DESC LIMIT 1;
