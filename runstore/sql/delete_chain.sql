-- name: DeleteChain :exec
-- Removes a chain ($1) of an organisation ($2) that never started, with its runs (cascade).
DELETE FROM chains WHERE id = $1 AND org_id = $2;
