-- name: GetRun :one
-- A run () of an organisation () as the public API shows it; the columns scanRun reads.
SELECT id, trace_id, job_type, skill_version, execution_type, status, queue, priority, user_id,
	metadata, output, error, attempt_errors, warnings, hold_reasons, audit_flagged, attempts,
	COALESCE(chain_id::text, ''), COALESCE(chain_step, ''), COALESCE(batch_id::text, ''), created_at,
	queued_at, started_at, finished_at,
	tokens_in, tokens_out, tokens_cached, cost_usd::float8, llm_calls,
	CASE WHEN status = 'pending_review' THEN approval_deadline END, payload, org_id
FROM runs WHERE id = $1 AND org_id = $2;
