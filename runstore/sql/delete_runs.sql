-- name: DeleteRuns :exec
-- Removes runs ($1) of an organisation ($2) that never reached their queue; their spans
-- and events go with them (ON DELETE CASCADE).
DELETE FROM runs WHERE id = ANY($1::uuid[]) AND org_id = $2;
