-- name: AddHoldReasons :exec
-- Appends reasons ($2, a JSON array) to the run's hold_reasons, which reviewers read.
UPDATE runs SET hold_reasons = hold_reasons || $2::jsonb WHERE id = $1;
