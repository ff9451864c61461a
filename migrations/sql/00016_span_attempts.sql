-- Spans record the attempt of the run that made them, and a resumed attempt closes the spans
-- that a dead attempt left running with status 'abandoned' (docs/executor.md). The
-- dispatcher's spans, made before any attempt, have attempt 0. Adding a column with a
-- constant default rewrites nothing (the default is kept in the catalogue).
--
-- The status check is replaced by one that also accepts 'abandoned'. It is added NOT VALID
-- (every existing row satisfies it, so a scan under this ALTER's exclusive lock would only
-- make writers wait) and validated by the next statement, which holds a lock that lets
-- spans be written meanwhile.
--
-- tools.honours_idempotency_key: the tool answers a repeated Idempotency-Key with the
-- first call's answer instead of acting again, so a side-effecting call whose outcome is
-- unknown (its worker died while it was in flight) may be sent again with the same key.

-- +goose Up
ALTER TABLE spans
    ADD COLUMN attempt integer NOT NULL DEFAULT 0,
    DROP CONSTRAINT spans_status_check,
    ADD CONSTRAINT spans_status_check
        CHECK (status IN ('running', 'ok', 'error', 'skipped', 'abandoned')) NOT VALID;
ALTER TABLE spans VALIDATE CONSTRAINT spans_status_check;
ALTER TABLE tools ADD COLUMN honours_idempotency_key boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE tools DROP COLUMN honours_idempotency_key;
UPDATE spans SET status = 'error' WHERE status = 'abandoned';
ALTER TABLE spans
    DROP CONSTRAINT spans_status_check,
    ADD CONSTRAINT spans_status_check CHECK (status IN ('running', 'ok', 'error', 'skipped')),
    DROP COLUMN attempt;
