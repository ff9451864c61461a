-- name: SaveSpans :exec
-- Inserts a batch of spans column by column, or updates the end, status, attributes and
-- billing of those that exist. Ids travel as text: pgx has no binary encoding of a []string
-- as uuid[], and finding that out again on every call (an error formatted, then text) costs
-- more than the casts. A span's attempt is written once, when it is inserted: the attempt
-- that made it.
INSERT INTO spans (id, run_id, org_id, trace_id, chain_id, parent_id, type, name,
	status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt)
SELECT id::uuid, run_id::uuid, org_id::uuid, trace_id::uuid, chain_id::uuid, parent_id::uuid, type, name,
	status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
	$8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::jsonb[], $13::text[], $14::text[],
	$15::bigint[], $16::bigint[], $17::bigint[], $18::numeric[], $19::integer[])
	AS s(id, run_id, org_id, trace_id, chain_id, parent_id, type, name, status, started_at, ended_at,
		attributes, provider, model, tokens_in, tokens_out, tokens_cached, cost_usd, attempt)
ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, ended_at = EXCLUDED.ended_at,
	attributes = EXCLUDED.attributes, provider = EXCLUDED.provider, model = EXCLUDED.model,
	tokens_in = EXCLUDED.tokens_in, tokens_out = EXCLUDED.tokens_out,
	tokens_cached = EXCLUDED.tokens_cached, cost_usd = EXCLUDED.cost_usd;
