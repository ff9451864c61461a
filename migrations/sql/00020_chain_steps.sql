-- Chains (Tier 3): what the coordinator knows of a chain run beside its definition, and one
-- row per step (and per for_each instance) — the state machine of seed 004 §5.2. The
-- coordinator changes them only in one transaction per transition, under an advisory lock
-- on the chain (runstore.LockChain). The chain's parent run is runs.id = parent_run_id; each
-- step's run has runs.chain_id and runs.chain_step.

-- +goose Up
ALTER TABLE chains
    ADD COLUMN parent_run_id uuid,
    ADD COLUMN input         jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN user_id       text NOT NULL DEFAULT '',
    ADD COLUMN priority      text NOT NULL DEFAULT 'normal',
    ADD COLUMN deadline_at   timestamptz,
    ADD COLUMN error         jsonb,
    ADD COLUMN rerun_of      uuid REFERENCES chains (id) ON DELETE SET NULL;
ALTER TABLE chains ADD CONSTRAINT chains_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'timed_out'));
CREATE INDEX chains_running_idx ON chains (updated_at) WHERE status = 'running';

CREATE TABLE chain_steps (
    chain_id    uuid NOT NULL REFERENCES chains (id) ON DELETE CASCADE,
    step_id     text NOT NULL,
    -- -1: the step as a whole; 0..n-1: the instances of a for_each step.
    instance    integer NOT NULL DEFAULT -1,
    -- pending → dispatched → completed | failed | skipped | cancelled. While dispatched,
    -- the step's run tells where it is (queued, held_for_review, running, ...).
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'dispatched', 'completed',
                    'failed', 'skipped', 'cancelled')),
    -- The step's current run (its latest attempt) and how many times it was dispatched.
    run_id      uuid,
    attempt     integer NOT NULL DEFAULT 0,
    -- For a for_each step once fanned out: how many instances it has.
    instances   integer,
    -- Why a step was skipped (condition, parent_failed) or what ended it otherwise.
    reason      text NOT NULL DEFAULT '',
    -- Set on a rerun's steps whose output was taken over from the chain it re-runs.
    reused      boolean NOT NULL DEFAULT false,
    -- The chain_step span drawing the step in the chain's tree.
    span_id     uuid,
    output      jsonb,
    error       jsonb,
    cost_usd    numeric(14, 8) NOT NULL DEFAULT 0,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (chain_id, step_id, instance)
);
CREATE UNIQUE INDEX chain_steps_run_idx ON chain_steps (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX chain_steps_dispatched_idx ON chain_steps (chain_id) WHERE status = 'dispatched';

-- +goose Down
DROP TABLE chain_steps;
DROP INDEX chains_running_idx;
ALTER TABLE chains DROP CONSTRAINT chains_status_check;
ALTER TABLE chains DROP COLUMN parent_run_id, DROP COLUMN input, DROP COLUMN user_id, DROP COLUMN priority,
    DROP COLUMN deadline_at, DROP COLUMN error, DROP COLUMN rerun_of;
