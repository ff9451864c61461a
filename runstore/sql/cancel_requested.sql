-- name: CancelRequested :one
-- Whether the run's cancellation was requested ($1: run id).
SELECT cancel_requested_at IS NOT NULL FROM runs WHERE id = $1;
