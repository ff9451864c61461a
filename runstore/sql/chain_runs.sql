-- name: ChainRuns :many
-- The runs of a chain ($1) of an organisation ($2), in creation order.
SELECT id::text FROM runs WHERE chain_id = $1 AND org_id = $2 ORDER BY created_at, id;
