-- name: ClaimWork :one
-- Claims a run for a worker's attempt: running, one more attempt, the end of a park.
-- $1: the run id; $2: when the worker's handler started, which becomes the run's started_at
-- on its first claim. It returns no row when the run is missing, in any status but queued or
-- running, or has a cancellation pending. The columns are work.sql's (r is the claimed row
-- as updated) then o.old, the status it had, o.parked, when it was last parked (null unless
-- it comes back from a park), and its park reason.
--
-- started_at is the handler's start, not the claim's: the run started when a worker took it
-- off the queue, and the claim's own round trip is part of executing it. Queue transit
-- (queued_at -> started_at) is then the queue's, whatever the database's load.
-- Like a transition's, it names the run's id on the updated row too (see transition.go).
UPDATE runs r SET status = 'running', attempts = r.attempts + 1,
	started_at = COALESCE(r.started_at, $2::timestamptz), parked_at = NULL, updated_at = now()
FROM (SELECT id, status AS old, parked_at AS parked FROM runs WHERE id = $1 FOR UPDATE) o
WHERE r.id = $1 AND r.id = o.id AND o.old IN ('queued', 'running') AND r.cancel_requested_at IS NULL
RETURNING r.id, r.org_id, r.trace_id, r.job_type, r.status, r.priority, r.queue, r.user_id,
	r.execution_type, r.payload, r.skill_version, r.chain_id::text, r.chain_step, r.cost_ceiling_usd::float8,
	r.attempts, r.queued_at, r.cancel_requested_at IS NOT NULL, r.deadline_at, r.waiting_since, r.started_at,
	o.old, o.parked, r.park_reason;
