-- name: Status :one
-- A run's status ($1: run id).
SELECT status FROM runs WHERE id = $1;
