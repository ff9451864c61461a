-- The month's LLM cost per organisation, beside its tokens: what the dispatcher's monthly
-- cost budget check (store.MonthlyCost) reads, one row, instead of summing the month's
-- usage_ledger rows. The provider router's ledger mover adds each row's cost_usd in the
-- statement that inserts the row and adds its tokens (provider-router/internal/ledger/
-- store.go), so a ledger row and its month's counter cannot disagree.
--
-- Every ledger row counts, whatever its outcome (an 'unknown' row, a call cut off at the
-- provider, holds cost 0 until its answer replaces it), as the sum did. The month is the
-- UTC calendar month of created_at, as the token counter's. numeric(20, 8): the ledger's
-- numeric(14, 8) summed exactly, with room for a month of them.
--
-- The backfill sums the ledger per (organisation, month); rows of a deleted organisation
-- have no counter (org_monthly_usage references orgs). An (organisation, month) with ledger
-- rows and no counter row gets one with tokens 0, which is what the token quota read.

-- +goose Up
ALTER TABLE org_monthly_usage ADD COLUMN cost_usd numeric(20, 8) NOT NULL DEFAULT 0;

INSERT INTO org_monthly_usage (org_id, month, cost_usd)
SELECT l.org_id, date_trunc('month', l.created_at AT TIME ZONE 'UTC')::date, sum(l.cost_usd)
FROM usage_ledger l
WHERE EXISTS (SELECT 1 FROM orgs o WHERE o.id = l.org_id)
GROUP BY 1, 2
ON CONFLICT (org_id, month) DO UPDATE SET cost_usd = EXCLUDED.cost_usd;

-- +goose Down
ALTER TABLE org_monthly_usage DROP COLUMN cost_usd;
