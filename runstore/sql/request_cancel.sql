-- name: RequestCancel :execrows
-- Marks a running run of the organisation for cancellation ($1: run id, $2: org id); the
-- executor stops at its next step. No row is changed when the run is not running.
UPDATE runs SET cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
WHERE id = $1 AND org_id = $2 AND status = 'running';
