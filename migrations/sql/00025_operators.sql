-- +goose Up
-- Platform operators and the organisations they run (docs/operations.md, "An operator's
-- first steps").
--
-- An operator's API key is an api_keys row with no organisation and the one role
-- `operator`: it manages organisations and sees none of their runs. Every other key belongs
-- to an organisation and never holds `operator`.
ALTER TABLE api_keys ALTER COLUMN org_id DROP NOT NULL;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_roles_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_roles_check
    CHECK (roles <@ ARRAY['dispatch', 'approve', 'skills_admin', 'viewer', 'admin', 'operator']::text[]);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_operator_check
    CHECK ((org_id IS NULL AND roles = ARRAY['operator']::text[])
        OR (org_id IS NOT NULL AND NOT ('operator' = ANY (roles))));

-- A suspended organisation dispatches nothing (403 ORG_SUSPENDED); who suspended it, when
-- and why stay on the row until it is resumed, and in org_audit for good. The monthly cost
-- budget (USD, this calendar month in UTC; NULL: none) stops dispatching once spent, as the
-- token quota does. The orgs_notify trigger (00010) already wakes every dispatcher's cache
-- on any update of the row.
ALTER TABLE orgs
    ADD COLUMN suspended_at            timestamptz,
    ADD COLUMN suspended_by            text NOT NULL DEFAULT '',
    ADD COLUMN suspend_reason          text NOT NULL DEFAULT '',
    ADD COLUMN monthly_cost_budget_usd numeric(14, 4) CHECK (monthly_cost_budget_usd IS NULL OR monthly_cost_budget_usd >= 0),
    ADD COLUMN created_by              text NOT NULL DEFAULT 'system';

-- What operators did to an organisation, newest last: create, update, suspend, resume,
-- admin_key. detail holds the changed settings or the counts of a suspension's sweep —
-- never a key.
CREATE TABLE org_audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id  uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    action  text NOT NULL CHECK (action IN ('create', 'update', 'suspend', 'resume', 'admin_key')),
    actor   text NOT NULL,
    reason  text NOT NULL DEFAULT '',
    detail  jsonb NOT NULL DEFAULT '{}',
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX org_audit_org_idx ON org_audit (org_id, id);

-- +goose Down
DROP TABLE org_audit;
ALTER TABLE orgs DROP COLUMN suspended_at, DROP COLUMN suspended_by, DROP COLUMN suspend_reason,
    DROP COLUMN monthly_cost_budget_usd, DROP COLUMN created_by;
DELETE FROM api_keys WHERE org_id IS NULL;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_operator_check;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_roles_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_roles_check
    CHECK (roles <@ ARRAY['dispatch', 'approve', 'skills_admin', 'viewer', 'admin']::text[]);
ALTER TABLE api_keys ALTER COLUMN org_id SET NOT NULL;
