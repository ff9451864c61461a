-- name: RunsByIdempotencyKeys :many
-- The runs an organisation ($1) created with any of the idempotency keys $2, with the chain
-- of a chain's parent run.
SELECT idempotency_key, id::text, trace_id::text, status, queue, hold_reasons, audit_flagged,
	CASE WHEN chain_step IS NULL THEN COALESCE(chain_id::text, '') ELSE '' END
FROM runs WHERE org_id = $1 AND idempotency_key = ANY($2::text[]);
