-- Why a run was parked (runs.parked_at): provider_capacity, provider_unavailable or
-- router_unreachable. The pickup that ends the park draws it as a queue_wait span with it.

-- +goose Up
ALTER TABLE runs ADD COLUMN park_reason text;

-- +goose Down
ALTER TABLE runs DROP COLUMN park_reason;
