-- +goose NO TRANSACTION
-- The reconciler looks every few seconds for queued or running runs whose last update is
-- older than its grace period. Without an index on that predicate the scan read the whole
-- runs table each time — every finished run ever kept — so its cost grew with the history.
-- This partial index holds only live runs (a few thousand at most, whatever the history) in
-- the order the scan reads them. It replaces runs_queued_idx, which no query used.
-- CONCURRENTLY: an existing deployment keeps dispatching while the index builds.

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_live_idx ON runs (updated_at) WHERE status IN ('queued', 'running');
DROP INDEX CONCURRENTLY IF EXISTS runs_queued_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_queued_idx ON runs (created_at) WHERE status = 'queued';
DROP INDEX CONCURRENTLY IF EXISTS runs_live_idx;
