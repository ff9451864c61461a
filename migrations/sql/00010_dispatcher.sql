-- +goose Up
-- Callback delivery state: the dispatcher POSTs a run's result to its callback_url once the
-- run is terminal, retrying with backoff; these columns make that durable across restarts
-- and shareable between dispatcher replicas (rows are claimed with SKIP LOCKED).
ALTER TABLE runs
    ADD COLUMN callback_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN callback_next_at  timestamptz,
    ADD COLUMN callback_done_at  timestamptz,
    ADD COLUMN callback_status   text CHECK (callback_status IN ('delivered', 'failed', 'refused'));
CREATE INDEX runs_callback_due_idx ON runs (callback_next_at NULLS FIRST, finished_at)
    WHERE callback_url <> '' AND finished_at IS NOT NULL AND callback_done_at IS NULL;

-- Organisations and API keys wake the dispatchers' caches too (channel registry_changed).
-- +goose StatementBegin
CREATE FUNCTION notify_identity_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'orgs' THEN
        PERFORM pg_notify('registry_changed', json_build_object(
            'table', 'orgs', 'org_id', COALESCE(NEW.id, OLD.id))::text);
    ELSE
        PERFORM pg_notify('registry_changed', json_build_object(
            'table', TG_TABLE_NAME, 'org_id', COALESCE(NEW.org_id, OLD.org_id),
            'key_id', COALESCE(NEW.id, OLD.id))::text);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER orgs_notify AFTER UPDATE OR DELETE ON orgs
    FOR EACH ROW EXECUTE FUNCTION notify_identity_change();
CREATE TRIGGER api_keys_notify AFTER UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION notify_identity_change();

-- +goose Down
DROP TRIGGER api_keys_notify ON api_keys;
DROP TRIGGER orgs_notify ON orgs;
DROP FUNCTION notify_identity_change();
DROP INDEX runs_callback_due_idx;
ALTER TABLE runs DROP COLUMN callback_attempts, DROP COLUMN callback_next_at,
    DROP COLUMN callback_done_at, DROP COLUMN callback_status;
