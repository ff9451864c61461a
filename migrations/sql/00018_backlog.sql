-- A run waiting for provider capacity is parked: it goes back to queued, its worker is
-- freed, and its task comes back at the return slot the router gave (docs/rate-limits.md,
-- "Waiting for capacity holds no worker").
--   parked_at, parked_until  the latest park and when the run is due back; the next pickup
--                            draws the wait as a queue_wait span and clears parked_at
--   waiting_since            when the run began waiting for the capacity of its current
--                            call (its first park since its last answered call); bounds the
--                            wait by the executor's maximum queue time
-- An organisation's backlog, its runs queued or running, is capped at orgs.max_backlog (0:
-- no cap): a dispatch beyond it answers 429 BACKLOG_FULL with Retry-After (seed 002's
-- backpressure).

-- +goose Up
ALTER TABLE runs ADD COLUMN parked_at timestamptz, ADD COLUMN parked_until timestamptz,
    ADD COLUMN waiting_since timestamptz;
ALTER TABLE orgs ADD COLUMN max_backlog integer NOT NULL DEFAULT 10000 CHECK (max_backlog >= 0);

-- +goose Down
ALTER TABLE orgs DROP COLUMN max_backlog;
ALTER TABLE runs DROP COLUMN parked_at, DROP COLUMN parked_until, DROP COLUMN waiting_since;
