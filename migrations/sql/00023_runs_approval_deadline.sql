-- +goose NO TRANSACTION
-- When a run paused for approval (pending_review) of an autonomous skill's tool call ends
-- timed_out (APPROVAL_TIMEOUT) if nobody has decided: the pause's time plus the skill's
-- autonomous.approval_timeout. NULL when the skill sets none (the pause waits forever).
-- Kept here, not as a Redis TTL, so a pause survives restarts of every process. The
-- partial index serves the reconciler's sweep, which reads only paused runs; it is built
-- concurrently so that runs stays writable meanwhile (adding the nullable column is
-- instant).

-- +goose Up
ALTER TABLE runs ADD COLUMN IF NOT EXISTS approval_deadline timestamptz;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_approval_deadline_idx ON runs (approval_deadline) WHERE status = 'pending_review';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS runs_approval_deadline_idx;
ALTER TABLE runs DROP COLUMN IF EXISTS approval_deadline;
