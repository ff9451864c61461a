-- name: ExpireApprovals :many
-- Ends as timed_out the runs paused for approval (pending_review) whose approval_deadline
-- is before $1 — the caller's clock, so that a test can pass a time after the deadline
-- instead of waiting — at most 500 at a time, earliest deadline first; $3, when not NULL,
-- names the one run to consider. Each ended run gets its error $2 (also appended to its
-- attempt errors), its finished_at, and its terminal event ($4 the type, $5 its data),
-- numbered after its last in the same update of the row. Rows another transaction holds
-- are skipped: a reviewer's move or the next sweep decides them. The partial index
-- runs_approval_deadline_idx serves the scan.
WITH t AS (
	UPDATE runs r SET status = 'timed_out', updated_at = now(), finished_at = now(),
		error = $2::jsonb, attempt_errors = r.attempt_errors || jsonb_build_array($2::jsonb),
		event_seq = r.event_seq + 1
	FROM (SELECT id FROM runs
		WHERE status = 'pending_review' AND approval_deadline < $1 AND ($3::uuid IS NULL OR id = $3::uuid)
		ORDER BY approval_deadline LIMIT 500 FOR UPDATE SKIP LOCKED) o
	WHERE r.id = o.id
	RETURNING r.id AS run_id, r.org_id, r.event_seq AS seq, COALESCE(r.chain_id::text, '') AS chain_id),
e AS (
	INSERT INTO run_events (run_id, seq, org_id, type, data)
	SELECT run_id, seq, org_id, $4, $5::jsonb FROM t)
SELECT run_id, org_id, seq, now(), chain_id FROM t;
