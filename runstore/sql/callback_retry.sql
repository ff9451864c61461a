-- name: CallbackRetry :exec
-- Schedules the next try of a run's ($1) callback: $2 the attempts made, $3 the delay.
UPDATE runs SET callback_attempts = $2, callback_next_at = now() + $3::interval
WHERE id = $1;
