-- name: InsertChain :exec
-- A new chain run ($1 id) of an organisation ($2): its trace, job type, definition, input,
-- user, priority, cost ceiling, deadline, parent run and the chain it re-runs (NULL: none).
INSERT INTO chains (id, org_id, trace_id, job_type, status, definition, input, user_id, priority,
	cost_ceiling_usd, deadline_at, parent_run_id, rerun_of)
VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $9, $10, $11, $12::uuid);
