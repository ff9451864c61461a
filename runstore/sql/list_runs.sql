-- name: ListRuns :many
-- An organisation's () runs, newest first:  statuses (empty: any),  job type and 
-- queue ('' : any),  and  the creation window,  and  the keyset cursor (runs
-- created before it),  the limit. The columns scanRun reads.
SELECT id, trace_id, job_type, skill_version, execution_type, status, queue, priority, user_id,
	metadata, output, error, attempt_errors, warnings, hold_reasons, audit_flagged, attempts,
	COALESCE(chain_id::text, ''), COALESCE(chain_step, ''), COALESCE(batch_id::text, ''), created_at,
	queued_at, started_at, finished_at,
	tokens_in, tokens_out, tokens_cached, cost_usd::float8, llm_calls,
	CASE WHEN status = 'pending_review' THEN approval_deadline END, payload, org_id
FROM runs
WHERE org_id = $1
  AND (COALESCE(cardinality($2::text[]), 0) = 0 OR status = ANY($2))
  AND ($3 = '' OR job_type = $3)
  AND ($4 = '' OR queue = $4)
  AND ($5::timestamptz IS NULL OR created_at >= $5)
  AND ($6::timestamptz IS NULL OR created_at < $6)
  AND ($7::timestamptz IS NULL OR (created_at, id) < ($7, $8::uuid))
ORDER BY created_at DESC, id DESC LIMIT $9;
