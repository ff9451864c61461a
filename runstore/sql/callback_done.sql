-- name: CallbackDone :exec
-- Ends a run's ($1) callback: $2 the attempts made, $3 delivered, failed or refused.
UPDATE runs SET callback_attempts = $2, callback_done_at = now(), callback_status = $3
WHERE id = $1;
