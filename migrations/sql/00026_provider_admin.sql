-- Providers administered per organisation through the dispatcher's admin API (issue 22):
--
-- * provider_credentials learn public-key sealing. scheme 'age' rows hold an age (X25519)
--   ciphertext sealed by the dispatcher to the router's public key (key_id = the recipient,
--   nonce empty); only the router holds the identity that opens them. scheme 'aes-gcm' rows
--   are the router's older key-ring ciphertexts, still opened by the ring until
--   `provider-router credentials rotate` re-seals them (docs/router.md, "Credentials").
--   Beside the sealed blob: the key's last four characters and who set it, for display, and
--   revoked_at (a revoked credential's ciphertext is wiped; calls fail CREDENTIAL_REVOKED).
-- * org_prices: an organisation's own prices, over the platform's defaults in prices.
-- * prices: built-in defaults for well-known models (list prices per million tokens, USD,
--   as the providers published them; an organisation overrides them in org_prices).

-- +goose Up
ALTER TABLE provider_credentials
    ADD COLUMN scheme     text NOT NULL DEFAULT 'aes-gcm' CHECK (scheme IN ('aes-gcm', 'age')),
    ADD COLUMN last4      text NOT NULL DEFAULT '' CHECK (char_length(last4) <= 4),
    ADD COLUMN set_by     text NOT NULL DEFAULT 'system',
    ADD COLUMN revoked_at timestamptz;

CREATE TABLE org_prices (
    org_id          uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    provider_kind   text NOT NULL CHECK (provider_kind IN ('openai', 'openrouter', 'openai_compatible', 'gemini', 'anthropic')),
    model           text NOT NULL CHECK (model <> ''),
    input_per_mtok  numeric(12, 6) NOT NULL CHECK (input_per_mtok >= 0),
    output_per_mtok numeric(12, 6) NOT NULL CHECK (output_per_mtok >= 0),
    cached_per_mtok numeric(12, 6) NOT NULL DEFAULT 0 CHECK (cached_per_mtok >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, provider_kind, model)
);
CREATE TRIGGER org_prices_router_notify AFTER INSERT OR UPDATE OR DELETE ON org_prices
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();

INSERT INTO prices (provider_kind, model, input_per_mtok, output_per_mtok, cached_per_mtok) VALUES
    ('openai', 'gpt-5', 1.25, 10.00, 0.125),
    ('openai', 'gpt-5-mini', 0.25, 2.00, 0.025),
    ('openai', 'gpt-5-nano', 0.05, 0.40, 0.005),
    ('openai', 'gpt-4.1', 2.00, 8.00, 0.50),
    ('openai', 'gpt-4.1-mini', 0.40, 1.60, 0.10),
    ('openai', 'gpt-4.1-nano', 0.10, 0.40, 0.025),
    ('openai', 'gpt-4o', 2.50, 10.00, 1.25),
    ('openai', 'gpt-4o-mini', 0.15, 0.60, 0.075),
    ('openai', 'o3', 2.00, 8.00, 0.50),
    ('openai', 'o4-mini', 1.10, 4.40, 0.275),
    ('anthropic', 'claude-opus-4-1', 15.00, 75.00, 1.50),
    ('anthropic', 'claude-sonnet-4-5', 3.00, 15.00, 0.30),
    ('anthropic', 'claude-sonnet-4-0', 3.00, 15.00, 0.30),
    ('anthropic', 'claude-haiku-4-5', 1.00, 5.00, 0.10),
    ('anthropic', 'claude-3-5-haiku-latest', 0.80, 4.00, 0.08),
    ('gemini', 'gemini-2.5-pro', 1.25, 10.00, 0.31),
    ('gemini', 'gemini-2.5-flash', 0.30, 2.50, 0.075),
    ('gemini', 'gemini-2.5-flash-lite', 0.10, 0.40, 0.025),
    ('openrouter', 'openai/gpt-4o-mini', 0.15, 0.60, 0.075),
    ('openrouter', 'anthropic/claude-sonnet-4.5', 3.00, 15.00, 0.30),
    ('openrouter', 'google/gemini-2.5-flash', 0.30, 2.50, 0.075)
ON CONFLICT (provider_kind, model) DO NOTHING;

-- +goose Down
DROP TABLE org_prices;
ALTER TABLE provider_credentials DROP COLUMN scheme, DROP COLUMN last4, DROP COLUMN set_by, DROP COLUMN revoked_at;
