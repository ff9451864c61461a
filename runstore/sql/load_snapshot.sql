-- name: LoadSnapshot :one
-- The newest snapshot of a run's key ($1 run id, $2 step key): its sequence number and state.
SELECT (state->>'seq')::integer, state->'state' FROM run_snapshots WHERE run_id = $1 AND step_key = $2;
