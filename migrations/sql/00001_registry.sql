-- +goose Up
CREATE EXTENSION IF NOT EXISTS pgcrypto;
-- The registry: who may call (organisations, API keys), what a job type means (skills and
-- their history), where work runs (queues), what it may touch (tools) and which providers
-- serve it (provider configs, encrypted credentials, routing policy, limits, prices).

CREATE TABLE orgs (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug                text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'),
    name                text NOT NULL,
    -- Where the organisation's data may be processed: eu, us or other.
    jurisdiction        text NOT NULL DEFAULT 'other' CHECK (jurisdiction IN ('eu', 'us', 'other')),
    -- Dispatch rate limits (sliding window, per minute); 0 means unlimited.
    org_rpm             integer NOT NULL DEFAULT 6000 CHECK (org_rpm >= 0),
    user_rpm            integer NOT NULL DEFAULT 600 CHECK (user_rpm >= 0),
    -- Monthly LLM token quota; NULL means unlimited.
    monthly_token_quota bigint CHECK (monthly_token_quota IS NULL OR monthly_token_quota >= 0),
    -- Keywords that hold a high-risk job for review, matched case-insensitively.
    pii_keywords        text[] NOT NULL DEFAULT '{}',
    -- Callback signing secret (HMAC-SHA256) and the private hosts callbacks may reach.
    callback_secret     text NOT NULL DEFAULT encode(gen_random_bytes(32), 'hex'),
    callback_allowlist  text[] NOT NULL DEFAULT '{}',
    -- Hosts the built-in http_request tool may reach.
    http_allowlist      text[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id       uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         text NOT NULL,
    -- The public part of the key ("sy_<prefix>_<secret>"), used to find the row.
    prefix       text NOT NULL UNIQUE,
    -- SHA-256 of the whole key; compared in constant time.
    secret_hash  bytea NOT NULL,
    roles        text[] NOT NULL CHECK (roles <@ ARRAY['dispatch', 'approve', 'skills_admin', 'viewer', 'admin']::text[]),
    created_by   text NOT NULL DEFAULT 'system',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_org_idx ON api_keys (org_id);

CREATE TABLE queues (
    name            text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    class           text NOT NULL DEFAULT 'cpu' CHECK (class IN ('cpu', 'gpu')),
    concurrency     integer NOT NULL DEFAULT 10 CHECK (concurrency BETWEEN 1 AND 10000),
    timeout_seconds integer NOT NULL DEFAULT 300 CHECK (timeout_seconds BETWEEN 1 AND 604800),
    description     text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO queues (name, class, concurrency, timeout_seconds, description) VALUES
    ('default', 'cpu', 50, 300, 'General CPU work: single LLM calls and short agents.'),
    ('gpu', 'gpu', 4, 1800, 'Work that needs a local accelerator.');

-- A skill binds a job type to how it runs, per organisation.
CREATE TABLE skills (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id            uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    job_type          text NOT NULL CHECK (job_type ~ '^[a-z][a-z0-9_.-]{0,127}$'),
    version           integer NOT NULL DEFAULT 1,
    enabled           boolean NOT NULL DEFAULT true,
    description       text NOT NULL DEFAULT '',
    execution_type    text NOT NULL CHECK (execution_type IN ('llm_only', 'tool_using', 'chain', 'autonomous')),
    routing_hint      text NOT NULL DEFAULT 'default'
                      CHECK (routing_hint IN ('fast', 'reasoning', 'code', 'long_context', 'creative', 'default')),
    model_override    text NOT NULL DEFAULT '',
    system_prompt     text NOT NULL DEFAULT '',
    tools             text[] NOT NULL DEFAULT '{}',
    max_iterations    integer NOT NULL DEFAULT 5 CHECK (max_iterations BETWEEN 1 AND 1000),
    max_tokens        integer NOT NULL DEFAULT 1024 CHECK (max_tokens BETWEEN 1 AND 1000000),
    temperature       double precision CHECK (temperature IS NULL OR temperature BETWEEN 0 AND 2),
    timeout_seconds   integer CHECK (timeout_seconds IS NULL OR timeout_seconds BETWEEN 1 AND 604800),
    max_retries       integer NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 50),
    queue             text NOT NULL DEFAULT 'default' REFERENCES queues (name),
    risk_level        text NOT NULL DEFAULT 'minimal' CHECK (risk_level IN ('minimal', 'limited', 'high', 'critical')),
    requires_approval boolean NOT NULL DEFAULT false,
    data_residency    text NOT NULL DEFAULT 'any' CHECK (data_residency IN ('any', 'eu_only', 'us_only')),
    cost_ceiling_usd  numeric(14, 6) CHECK (cost_ceiling_usd IS NULL OR cost_ceiling_usd >= 0),
    -- Chain steps (execution_type chain) and autonomous settings, shaped by their tiers.
    chain             jsonb,
    autonomous        jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    updated_by        text NOT NULL DEFAULT 'system',
    UNIQUE (org_id, job_type)
);

-- Every change to a skill, with the whole binding after the change.
CREATE TABLE skill_history (
    id         bigserial PRIMARY KEY,
    skill_id   uuid NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    org_id     uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    job_type   text NOT NULL,
    version    integer NOT NULL,
    action     text NOT NULL CHECK (action IN ('create', 'update', 'disable', 'enable')),
    snapshot   jsonb NOT NULL,
    changed_by text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX skill_history_skill_idx ON skill_history (skill_id, version DESC);

-- Every skill or queue change wakes the caches of every dispatcher and executor.
-- +goose StatementBegin
CREATE FUNCTION notify_registry_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'skills' THEN
        PERFORM pg_notify('registry_changed', json_build_object(
            'table', 'skills', 'org_id', COALESCE(NEW.org_id, OLD.org_id),
            'job_type', COALESCE(NEW.job_type, OLD.job_type))::text);
    ELSE
        PERFORM pg_notify('registry_changed', json_build_object(
            'table', TG_TABLE_NAME, 'name', COALESCE(NEW.name, OLD.name))::text);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER skills_notify AFTER INSERT OR UPDATE OR DELETE ON skills
    FOR EACH ROW EXECUTE FUNCTION notify_registry_change();
CREATE TRIGGER queues_notify AFTER INSERT OR UPDATE OR DELETE ON queues
    FOR EACH ROW EXECUTE FUNCTION notify_registry_change();

-- Tools an LLM may call. org_id NULL marks a platform tool; tool_grants says who may use it.
CREATE TABLE tools (
    name              text PRIMARY KEY CHECK (name ~ '^[a-zA-Z][a-zA-Z0-9_-]{0,63}$'),
    description       text NOT NULL,
    parameters        jsonb NOT NULL DEFAULT '{"type":"object"}',
    -- builtin: implemented inside the executor (http_request); http: method + url_template.
    kind              text NOT NULL DEFAULT 'http' CHECK (kind IN ('http', 'builtin')),
    method            text NOT NULL DEFAULT 'POST' CHECK (method IN ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')),
    url_template      text NOT NULL DEFAULT '',
    timeout_ms        integer NOT NULL DEFAULT 30000 CHECK (timeout_ms BETWEEN 1 AND 600000),
    side_effecting    boolean NOT NULL DEFAULT false,
    requires_approval boolean NOT NULL DEFAULT false,
    -- Hosts this tool may reach although they resolve to private addresses.
    allow_private     boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE tool_grants (
    tool_name text NOT NULL REFERENCES tools (name) ON DELETE CASCADE,
    org_id    uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    PRIMARY KEY (tool_name, org_id)
);

-- Providers an organisation has enabled, with a model per role.
CREATE TABLE provider_configs (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name          text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('openai', 'openrouter', 'openai_compatible', 'gemini', 'anthropic')),
    base_url      text NOT NULL DEFAULT '',
    -- Where the endpoint processes data: eu, us or global.
    jurisdiction  text NOT NULL DEFAULT 'global' CHECK (jurisdiction IN ('eu', 'us', 'global')),
    -- Role -> model, e.g. {"default": "gpt-4o-mini", "reasoning": "o3"}.
    models        jsonb NOT NULL DEFAULT '{}',
    enabled       boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

-- Provider API keys, AES-256-GCM encrypted; only the router holds the key to open them.
CREATE TABLE provider_credentials (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    provider_config_id uuid NOT NULL UNIQUE REFERENCES provider_configs (id) ON DELETE CASCADE,
    key_id             text NOT NULL,
    nonce              bytea NOT NULL,
    ciphertext         bytea NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    rotated_at         timestamptz
);

-- Routing hint -> provider (and optionally model) per organisation.
CREATE TABLE routing_policies (
    org_id             uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    hint               text NOT NULL CHECK (hint IN ('fast', 'reasoning', 'code', 'long_context', 'creative', 'default')),
    provider_config_id uuid NOT NULL REFERENCES provider_configs (id) ON DELETE CASCADE,
    model              text NOT NULL DEFAULT '',
    PRIMARY KEY (org_id, hint)
);

-- Upstream limits per provider credential and model; 0 means no limit.
CREATE TABLE provider_limits (
    provider_config_id uuid NOT NULL REFERENCES provider_configs (id) ON DELETE CASCADE,
    model              text NOT NULL,
    rpm                integer NOT NULL DEFAULT 0 CHECK (rpm >= 0),
    tpm                integer NOT NULL DEFAULT 0 CHECK (tpm >= 0),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_config_id, model)
);

-- Prices in USD per million tokens, per provider kind and model.
CREATE TABLE prices (
    provider_kind      text NOT NULL,
    model              text NOT NULL,
    input_per_mtok     numeric(12, 6) NOT NULL CHECK (input_per_mtok >= 0),
    output_per_mtok    numeric(12, 6) NOT NULL CHECK (output_per_mtok >= 0),
    cached_per_mtok    numeric(12, 6) NOT NULL DEFAULT 0 CHECK (cached_per_mtok >= 0),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_kind, model)
);

-- +goose Down
DROP TABLE prices, provider_limits, routing_policies, provider_credentials, provider_configs,
    tool_grants, tools, skill_history, skills, queues, api_keys, orgs CASCADE;
DROP FUNCTION notify_registry_change();
