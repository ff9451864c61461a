-- +goose NO TRANSACTION
-- The usage ledger is written at least once per provider call (a Redis stream moved into
-- Postgres by every router replica, with a synchronous Postgres write when Redis refuses
-- the entry): call_key makes a repeated write of the same call a no-op, so each paid call
-- has exactly one row. It is the run, the step key and the token of the call that paid
-- (a random key for calls without a run or step), never reused. step_key is the run's
-- attempt-independent position of the call (X-Step-Key; '' when the caller sent none).
-- Rows written before this migration have no call key (NULLs never conflict).
-- CONCURRENTLY: an existing deployment keeps writing while the index builds.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS call_key text,
    ADD COLUMN IF NOT EXISTS step_key text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS usage_ledger_call_key_idx ON usage_ledger (call_key);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS usage_ledger_call_key_idx;
ALTER TABLE usage_ledger DROP COLUMN IF EXISTS call_key, DROP COLUMN IF EXISTS step_key;
