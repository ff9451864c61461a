-- name: Announced :many
-- The run's ($1) events of the types $2 (the announcements of the autonomous tier), each
-- with the journal step key of the answer it announces (data's "announces"; NULL for an
-- event written before announcements carried one).
SELECT type, data->>'announces' FROM run_events WHERE run_id = $1 AND type = ANY($2::text[]);
