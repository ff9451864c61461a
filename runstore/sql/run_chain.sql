-- name: RunChain :one
-- The chain ('' for none) of a run ($1) of an organisation ($2).
SELECT COALESCE(chain_id::text, '') FROM runs WHERE id = $1 AND org_id = $2;
