-- The audit export (GET /api/v1/admin/audit) can pseudonymise user ids: an HMAC-SHA-256 of
-- the id keyed with the organisation's own pseudonym key, made by the dispatcher on first
-- use (32 random bytes) and never shown by any API. One key per organisation: the same
-- user has the same pseudonym in all of its organisation's exports and an unlinkable one
-- in another's. Deleting the row makes later exports use new pseudonyms.
--
-- No index is added: the usage report and the audit export read usage_ledger through
-- usage_ledger_org_month_idx (org_id, created_at) and spans through spans_run_idx
-- (docs/PERFORMANCE.md shows their plans).

-- +goose Up
CREATE TABLE org_pseudonym_keys (
    org_id     uuid PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    key        bytea NOT NULL CHECK (octet_length(key) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE org_pseudonym_keys;
