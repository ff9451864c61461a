-- name: InsertRuns :execrows
-- Inserts a batch of new runs, column by column. Ids travel as text: pgx has
-- no binary encoding of a []string as uuid[]. A run whose idempotency key its organisation
-- already used is skipped (the statement's row count tells). The skill snapshot travels as its
-- 32-byte digest, not as jsonb for Postgres to parse.
INSERT INTO runs (id, org_id, trace_id, job_type, skill_id, skill_version,
	skill_snapshot_digest, execution_type, queue, priority, status, user_id, payload, metadata, callback_url,
	idempotency_key, hold_reasons, audit_flagged, cost_ceiling_usd, deadline_at, batch_id, queued_at,
	event_seq, chain_id, chain_step)
SELECT id::uuid, org_id::uuid, trace_id::uuid, job_type, skill_id::uuid, skill_version, skill_snapshot_digest,
	execution_type, queue, priority, status, user_id, payload, metadata, callback_url, idempotency_key,
	hold_reasons, audit_flagged, cost_ceiling_usd, deadline_at, batch_id::uuid,
	CASE WHEN status = 'queued' THEN now() END, 1, chain_id::uuid, chain_step
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bytea[], $8::text[],
	$9::text[], $10::text[], $11::text[], $12::text[], $13::jsonb[], $14::jsonb[], $15::text[], $16::text[],
	$17::jsonb[], $18::bool[], $19::numeric[], $20::timestamptz[], $21::text[], $22::text[], $23::text[])
	AS r(id, org_id, trace_id, job_type, skill_id, skill_version, skill_snapshot_digest, execution_type, queue,
		priority, status, user_id, payload, metadata, callback_url, idempotency_key, hold_reasons,
		audit_flagged, cost_ceiling_usd, deadline_at, batch_id, chain_id, chain_step)
ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
