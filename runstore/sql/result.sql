-- name: Result :one
-- A run's status, output and error ($1: run id): what a chain step reports.
SELECT status, output, error FROM runs WHERE id = $1;
