-- +goose NO TRANSACTION
-- Two indexes no query reads: spans by trace id and run events by organisation and time.
-- Every span and event insert maintained them — the dispatcher writes two spans and one
-- event per run inside the grouped commit that is a dispatch's latency, and the executor
-- several of each per run. Reads go by run: spans through spans_run_idx, events through
-- their primary key (run_id, seq), and deleting a run (or its organisation) cascades through
-- those too. Recreate one when a query needs it.
-- CONCURRENTLY: an existing deployment keeps writing while the indexes go.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS spans_trace_idx;
DROP INDEX CONCURRENTLY IF EXISTS run_events_org_ts_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS spans_trace_idx ON spans (trace_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_events_org_ts_idx ON run_events (org_id, ts);
