-- name: Journaled :one
-- A replay-journal entry and when it was written ($1: run id, $2: step key).
SELECT data, created_at FROM run_journal WHERE run_id = $1 AND step_key = $2;
