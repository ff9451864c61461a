-- name: AppendJournal :execrows
-- Appends a replay-journal entry ($1 run id, $2 step key, $3 kind, $4 data); a step that is
-- journaled already is left as it is (no row inserted).
INSERT INTO run_journal (run_id, step_key, kind, data) VALUES ($1, $2, $3, $4)
ON CONFLICT (run_id, step_key) DO NOTHING;
