-- name: SaveSnapshot :exec
-- Keeps the newest snapshot of a run's key ($1 run id, $2 step key, $3 sequence number, $4
-- state): the row holds {"seq": $3, "state": $4} and is replaced only by a higher sequence,
-- so an attempt that lags behind another never winds a snapshot back.
INSERT INTO run_snapshots (run_id, step_key, state)
VALUES ($1, $2, jsonb_build_object('seq', $3::integer, 'state', $4::jsonb))
ON CONFLICT (run_id, step_key) DO UPDATE SET state = EXCLUDED.state, created_at = now()
WHERE (run_snapshots.state->>'seq')::integer < $3::integer;
