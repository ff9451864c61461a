-- +goose Up
-- Every change to what the provider router reads from the registry wakes every router
-- replica: routing (provider configs, policies), limits, prices, credentials (ids only,
-- never the ciphertext) and organisations' token quotas. Routers LISTEN on
-- router_config_changed and drop or reload what changed, so an admin edit applies within
-- a second on every replica.

-- +goose StatementBegin
CREATE FUNCTION notify_router_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := to_jsonb(COALESCE(NEW, OLD));
BEGIN
    PERFORM pg_notify('router_config_changed', json_build_object(
        'table', TG_TABLE_NAME,
        'org_id', CASE WHEN TG_TABLE_NAME = 'orgs' THEN r ->> 'id' ELSE r ->> 'org_id' END,
        'provider_config_id', CASE WHEN TG_TABLE_NAME = 'provider_configs' THEN r ->> 'id'
                                   ELSE r ->> 'provider_config_id' END,
        'model', r ->> 'model')::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER provider_configs_router_notify AFTER INSERT OR UPDATE OR DELETE ON provider_configs
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();
CREATE TRIGGER routing_policies_router_notify AFTER INSERT OR UPDATE OR DELETE ON routing_policies
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();
CREATE TRIGGER provider_limits_router_notify AFTER INSERT OR UPDATE OR DELETE ON provider_limits
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();
CREATE TRIGGER prices_router_notify AFTER INSERT OR UPDATE OR DELETE ON prices
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();
CREATE TRIGGER provider_credentials_router_notify AFTER INSERT OR UPDATE OR DELETE ON provider_credentials
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();
CREATE TRIGGER orgs_router_notify AFTER UPDATE OF monthly_token_quota OR DELETE ON orgs
    FOR EACH ROW EXECUTE FUNCTION notify_router_change();

-- +goose Down
DROP TRIGGER orgs_router_notify ON orgs;
DROP TRIGGER provider_credentials_router_notify ON provider_credentials;
DROP TRIGGER prices_router_notify ON prices;
DROP TRIGGER provider_limits_router_notify ON provider_limits;
DROP TRIGGER routing_policies_router_notify ON routing_policies;
DROP TRIGGER provider_configs_router_notify ON provider_configs;
DROP FUNCTION notify_router_change();
