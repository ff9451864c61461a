-- Each usage_ledger row names the llm_call span its call was made under: the executor sends
-- the span's id with the call (X-Span-ID) and the provider router records it with the
-- call's row, so the audit export (GET /api/v1/admin/audit) reads it from the row instead
-- of looking the span up among its run's spans (spans_run_idx, then each span's
-- attributes ->> 'step').
--
-- Nullable and not backfilled: rows written before this migration, and rows of calls made
-- without a span (a caller that sends none), have NULL; the export looks their span up as
-- before. Not a foreign key: spans are written by the executor, ledger rows by the router,
-- in either order, and a run's spans may be deleted with the run while its ledger rows
-- stay. Adding a nullable column without a default rewrites nothing.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN span_id uuid;

-- +goose Down
ALTER TABLE usage_ledger DROP COLUMN span_id;
