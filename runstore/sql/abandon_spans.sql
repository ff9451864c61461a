-- name: AbandonSpans :many
-- Closes the spans of run $1 that attempts before attempt $2 left running, except a
-- governance_review span the run's journal names as the review of a pause for approval;
-- returns them as closed, with the columns scanSpan reads.
UPDATE spans SET status = 'abandoned', ended_at = now(),
	attributes = attributes || jsonb_build_object('abandoned_by_attempt', $2::integer)
WHERE run_id = $1 AND status = 'running' AND attempt BETWEEN 1 AND $2::integer - 1
	AND id::text NOT IN (SELECT data->>'review_span_id' FROM run_journal
		WHERE run_id = $1 AND kind = 'decision' AND data ? 'review_span_id')
RETURNING id, run_id, trace_id, COALESCE(chain_id::text, ''), COALESCE(parent_id::text, ''), attempt,
	type, name, status, started_at, ended_at, attributes, provider, model, tokens_in, tokens_out,
	tokens_cached, cost_usd::float8;
