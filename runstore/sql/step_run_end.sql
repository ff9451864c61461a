-- name: StepRunEnd :one
-- How a chain step's run ($1) stands: its chain, status, output, error and cost.
SELECT COALESCE(chain_id::text, ''), status, output, error, cost_usd::float8 FROM runs WHERE id = $1;
