-- +goose Up
-- Runs and everything that happens to them: the event journal, replay entries, snapshots,
-- spans, chains, the tool-call ledger, reviews, the usage ledger and callback deliveries.

CREATE TABLE chains (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    trace_id         uuid NOT NULL,
    job_type         text NOT NULL,
    status           text NOT NULL,
    definition       jsonb NOT NULL,
    -- Coordinator state: per step status, outputs, fork/join counters.
    state            jsonb NOT NULL DEFAULT '{}',
    cost_ceiling_usd numeric(14, 6),
    cost_usd         numeric(14, 8) NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
CREATE INDEX chains_org_idx ON chains (org_id, created_at DESC);

CREATE TABLE batches (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id     uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    size       integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runs (
    id                  uuid PRIMARY KEY,
    org_id              uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    trace_id            uuid NOT NULL,
    job_type            text NOT NULL,
    skill_id            uuid REFERENCES skills (id) ON DELETE SET NULL,
    skill_version       integer NOT NULL,
    -- The binding as it was at dispatch; the executor re-resolves and compares.
    skill_snapshot      jsonb NOT NULL,
    execution_type      text NOT NULL,
    queue               text NOT NULL,
    priority            text NOT NULL DEFAULT 'normal' CHECK (priority IN ('critical', 'high', 'normal', 'low')),
    status              text NOT NULL CHECK (status IN ('held_for_review', 'queued', 'running', 'pending_review',
                            'completed', 'completed_max_iterations', 'completed_budget_exhausted', 'failed',
                            'timed_out', 'cancelled', 'rejected', 'skipped')),
    user_id             text NOT NULL DEFAULT '',
    payload             jsonb NOT NULL,
    metadata            jsonb NOT NULL DEFAULT '{}',
    callback_url        text NOT NULL DEFAULT '',
    idempotency_key     text,
    hold_reasons        jsonb NOT NULL DEFAULT '[]',
    audit_flagged       boolean NOT NULL DEFAULT false,
    output              jsonb,
    -- Final error {code, message, ...} and every attempt's error.
    error               jsonb,
    attempt_errors      jsonb NOT NULL DEFAULT '[]',
    warnings            jsonb NOT NULL DEFAULT '[]',
    attempts            integer NOT NULL DEFAULT 0,
    tokens_in           bigint NOT NULL DEFAULT 0,
    tokens_out          bigint NOT NULL DEFAULT 0,
    tokens_cached       bigint NOT NULL DEFAULT 0,
    cost_usd            numeric(14, 8) NOT NULL DEFAULT 0,
    cost_ceiling_usd    numeric(14, 6),
    llm_calls           integer NOT NULL DEFAULT 0,
    chain_id            uuid REFERENCES chains (id) ON DELETE CASCADE,
    chain_step          text,
    batch_id            uuid REFERENCES batches (id) ON DELETE SET NULL,
    parent_run_id       uuid,
    -- The last event sequence number handed out for this run (events are numbered 1, 2, ...).
    event_seq           bigint NOT NULL DEFAULT 0,
    cancel_requested_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    queued_at           timestamptz,
    started_at          timestamptz,
    finished_at         timestamptz,
    deadline_at         timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX runs_idempotency_idx ON runs (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_org_created_idx ON runs (org_id, created_at DESC);
CREATE INDEX runs_org_status_idx ON runs (org_id, status, created_at DESC);
CREATE INDEX runs_queued_idx ON runs (created_at) WHERE status = 'queued';
CREATE INDEX runs_chain_idx ON runs (chain_id) WHERE chain_id IS NOT NULL;

-- The event journal: every event published for a run, in order, for replay to clients.
CREATE TABLE run_events (
    run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    org_id uuid NOT NULL,
    type   text NOT NULL,
    ts     timestamptz NOT NULL DEFAULT now(),
    data   jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX run_events_org_ts_idx ON run_events (org_id, ts);

-- Replay entries: each LLM answer and tool result, keyed by its step path, written before
-- the worker moves on. A resumed run reads these instead of calling again.
CREATE TABLE run_journal (
    run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_key   text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('llm_answer', 'tool_result', 'decision', 'note')),
    data       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_key)
);

-- Snapshots keep replay short: the loop state after step_key.
CREATE TABLE run_snapshots (
    run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_key   text NOT NULL,
    state      jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_key)
);

CREATE TABLE spans (
    id            uuid PRIMARY KEY,
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    org_id        uuid NOT NULL,
    trace_id      uuid NOT NULL,
    chain_id      uuid,
    parent_id     uuid,
    type          text NOT NULL CHECK (type IN ('dispatch', 'governance_check', 'governance_review', 'queue_wait',
                      'skill_resolve', 'react_iteration', 'llm_call', 'tool_call', 'chain_step', 'chain_fork',
                      'chain_join', 'goal_decompose', 'reflection', 'plan_adjust', 'goal_evaluate',
                      'batch_fanout', 'batch_aggregate')),
    name          text NOT NULL,
    status        text NOT NULL CHECK (status IN ('running', 'ok', 'error', 'skipped')),
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    attributes    jsonb NOT NULL DEFAULT '{}',
    provider      text,
    model         text,
    tokens_in     bigint,
    tokens_out    bigint,
    tokens_cached bigint,
    cost_usd      numeric(14, 8)
);
CREATE INDEX spans_run_idx ON spans (run_id, started_at);
CREATE INDEX spans_trace_idx ON spans (trace_id);

-- Side-effecting tool calls: a row is inserted before the call, keyed by the idempotency key
-- (run, step path, tool, canonical arguments), so the same key never reaches the tool twice.
CREATE TABLE tool_calls (
    idempotency_key text PRIMARY KEY,
    run_id          uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    org_id          uuid NOT NULL,
    tool_name       text NOT NULL,
    step_key        text NOT NULL,
    arguments       jsonb NOT NULL,
    status          text NOT NULL CHECK (status IN ('started', 'succeeded', 'failed')),
    response        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz
);
CREATE INDEX tool_calls_run_idx ON tool_calls (run_id);

CREATE TABLE reviews (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    org_id     uuid NOT NULL,
    decision   text NOT NULL CHECK (decision IN ('approve', 'reject')),
    reviewer   text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reviews_run_idx ON reviews (run_id);

-- One row per LLM call, written off the request's critical path.
CREATE TABLE usage_ledger (
    id            bigserial PRIMARY KEY,
    org_id        uuid NOT NULL,
    user_id       text NOT NULL DEFAULT '',
    run_id        uuid,
    chain_id      uuid,
    job_type      text NOT NULL DEFAULT '',
    provider      text NOT NULL,
    model         text NOT NULL,
    tokens_in     bigint NOT NULL,
    tokens_out    bigint NOT NULL,
    tokens_cached bigint NOT NULL DEFAULT 0,
    cost_usd      numeric(14, 8) NOT NULL,
    latency_ms    integer NOT NULL,
    queue_wait_ms integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_ledger_org_month_idx ON usage_ledger (org_id, created_at);

-- Tokens used per organisation and calendar month (UTC): what quota checks read.
CREATE TABLE org_monthly_usage (
    org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    month  date NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (org_id, month)
);

CREATE TABLE callback_deliveries (
    id           bigserial PRIMARY KEY,
    run_id       uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    url          text NOT NULL,
    attempt      integer NOT NULL,
    status_code  integer,
    error        text,
    delivered_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE callback_deliveries, org_monthly_usage, usage_ledger, reviews, tool_calls, spans,
    run_snapshots, run_journal, run_events, runs, batches, chains CASCADE;
