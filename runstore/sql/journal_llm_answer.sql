-- name: JournalLlmAnswer :one
-- Journals a paid LLM answer and adds it to the run's totals in one statement: $1 run id,
-- $2 tokens in, $3 tokens out, $4 tokens cached, $5 cost, $6 step key, $7 the entry. When
-- the step was journaled already (by an attempt racing this one) nothing is added twice and
-- no row is returned. An answered call ends the run's wait for capacity (waiting_since).
WITH j AS (
	INSERT INTO run_journal (run_id, step_key, kind, data) VALUES ($1, $6, 'llm_answer', $7)
	ON CONFLICT (run_id, step_key) DO NOTHING RETURNING 1)
UPDATE runs SET tokens_in = tokens_in + $2, tokens_out = tokens_out + $3,
	tokens_cached = tokens_cached + $4, cost_usd = cost_usd + $5, llm_calls = llm_calls + 1,
	waiting_since = NULL
WHERE id = $1 AND EXISTS (SELECT 1 FROM j)
RETURNING tokens_in, tokens_out, cost_usd::float8, llm_calls;
