-- Spans of the multi-agent patterns of autonomous skills (docs/executor.md, "Patterns"):
-- 'agent', one per agent of a compete, self_consistent, critic or collaborate run, and
-- 'judge', the call that picks (or synthesises) the run's answer. The type check is
-- replaced by one that also accepts them, added NOT VALID (every existing row satisfies it,
-- so a scan under this ALTER's exclusive lock would only make writers wait) and validated
-- by the next statement, which lets spans be written meanwhile.

-- +goose Up
ALTER TABLE spans
    DROP CONSTRAINT spans_type_check,
    ADD CONSTRAINT spans_type_check CHECK (type IN ('dispatch', 'governance_check', 'governance_review',
        'queue_wait', 'skill_resolve', 'react_iteration', 'llm_call', 'tool_call', 'chain_step', 'chain_fork',
        'chain_join', 'goal_decompose', 'reflection', 'plan_adjust', 'goal_evaluate', 'batch_fanout',
        'batch_aggregate', 'agent', 'judge')) NOT VALID;
ALTER TABLE spans VALIDATE CONSTRAINT spans_type_check;

-- +goose Down
DELETE FROM spans WHERE type IN ('agent', 'judge');
ALTER TABLE spans
    DROP CONSTRAINT spans_type_check,
    ADD CONSTRAINT spans_type_check CHECK (type IN ('dispatch', 'governance_check', 'governance_review',
        'queue_wait', 'skill_resolve', 'react_iteration', 'llm_call', 'tool_call', 'chain_step', 'chain_fork',
        'chain_join', 'goal_decompose', 'reflection', 'plan_adjust', 'goal_evaluate', 'batch_fanout',
        'batch_aggregate'));
