-- name: RunsByIdempotencyKeys :many
-- The runs an organisation ($1) created with any of the idempotency keys $2.
SELECT idempotency_key, id::text, trace_id::text, status, queue, hold_reasons, audit_flagged
FROM runs WHERE org_id = $1 AND idempotency_key = ANY($2::text[]);
