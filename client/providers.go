package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Provider is one of the organisation's provider endpoints; its API key is never shown,
// only Credential's last four characters and when it was set.
type Provider = apitypes.Provider

// ProviderSpec is what an admin sets on a provider.
type ProviderSpec = apitypes.ProviderSpec

// CredentialInfo describes a stored API key without showing it.
type CredentialInfo = apitypes.CredentialInfo

// RoutingPolicy maps routing hints to providers (and models).
type RoutingPolicy = apitypes.RoutingPolicy

// RoutingRule is one hint of a RoutingPolicy.
type RoutingRule = apitypes.RoutingRule

// ProviderLimit is the RPM/TPM limit of a provider's model.
type ProviderLimit = apitypes.ProviderLimit

// LimitSet sets a provider model's RPM/TPM limits.
type LimitSet = apitypes.LimitSet

// Price is a model's price in effect for the organisation.
type Price = apitypes.Price

// PriceSet sets the organisation's price of a model.
type PriceSet = apitypes.PriceSet

// ProviderTest is the outcome of a "Test connection" probe.
type ProviderTest = apitypes.ProviderTest

// ProvidersService administers the organisation's providers, their API keys, the routing
// policy, limits and prices (role admin).
type ProvidersService struct{ c *Client }

func providerPath(name string) string { return "/api/v1/admin/providers/" + pathEscape(name) }

// List returns the organisation's providers.
func (p *ProvidersService) List(ctx context.Context) ([]Provider, error) {
	var out list[Provider]
	err := p.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/providers", retryable: true}, &out)
	return out.items, err
}

// Get returns one provider.
func (p *ProvidersService) Get(ctx context.Context, name string) (Provider, error) {
	var out Provider
	err := p.c.do(ctx, request{method: http.MethodGet, path: providerPath(name), retryable: true}, &out)
	return out, err
}

// Put creates or changes a provider; created is true when it did not exist.
func (p *ProvidersService) Put(ctx context.Context, name string, spec ProviderSpec) (out Provider, created bool, err error) {
	var status int
	err = p.c.do(ctx, request{method: http.MethodPut, path: providerPath(name), body: spec, retryable: true, okStatus: &status}, &out)
	return out, status == http.StatusCreated, err
}

// Delete removes a provider (refused while the routing policy names it).
func (p *ProvidersService) Delete(ctx context.Context, name string) error {
	return p.c.do(ctx, request{method: http.MethodDelete, path: providerPath(name), retryable: true}, nil)
}

// SetKey sets or rotates the provider's API key. The dispatcher seals it for the router
// and never shows it again.
func (p *ProvidersService) SetKey(ctx context.Context, name, apiKey string) (CredentialInfo, error) {
	var out CredentialInfo
	err := p.c.do(ctx, request{method: http.MethodPut, path: providerPath(name) + "/credential",
		body: apitypes.CredentialSet{APIKey: apiKey}, retryable: true}, &out)
	return out, err
}

// RevokeKey revokes the provider's API key: calls to it fail CREDENTIAL_REVOKED.
func (p *ProvidersService) RevokeKey(ctx context.Context, name string) error {
	return p.c.do(ctx, request{method: http.MethodDelete, path: providerPath(name) + "/credential", retryable: true}, nil)
}

// Test sends a tiny probe call to the provider through the normal path and returns what
// the provider answered, or its error (OK false).
func (p *ProvidersService) Test(ctx context.Context, name string) (ProviderTest, error) {
	var out ProviderTest
	err := p.c.do(ctx, request{method: http.MethodPost, path: providerPath(name) + "/test"}, &out)
	return out, err
}

// Routing returns the routing policy.
func (p *ProvidersService) Routing(ctx context.Context) (RoutingPolicy, error) {
	var out RoutingPolicy
	err := p.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/routing", retryable: true}, &out)
	return out, err
}

// SetRouting replaces the routing policy; a policy that does not resolve is refused.
func (p *ProvidersService) SetRouting(ctx context.Context, pol RoutingPolicy) (RoutingPolicy, error) {
	var out RoutingPolicy
	err := p.c.do(ctx, request{method: http.MethodPut, path: "/api/v1/admin/routing", body: pol, retryable: true}, &out)
	return out, err
}

// Limits returns every RPM/TPM limit of the organisation's providers.
func (p *ProvidersService) Limits(ctx context.Context) ([]ProviderLimit, error) {
	var out list[ProviderLimit]
	err := p.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/limits", retryable: true}, &out)
	return out.items, err
}

// SetLimit sets a provider model's RPM/TPM limits (0: no limit).
func (p *ProvidersService) SetLimit(ctx context.Context, l LimitSet) (ProviderLimit, error) {
	var out ProviderLimit
	err := p.c.do(ctx, request{method: http.MethodPut, path: "/api/v1/admin/limits", body: l, retryable: true}, &out)
	return out, err
}

// DeleteLimit removes a provider model's limits.
func (p *ProvidersService) DeleteLimit(ctx context.Context, provider, model string) error {
	return p.c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/admin/limits",
		query: url.Values{"provider": {provider}, "model": {model}}, retryable: true}, nil)
}

// Prices returns the prices in effect: the organisation's own and the built-in defaults.
func (p *ProvidersService) Prices(ctx context.Context) ([]Price, error) {
	var out list[Price]
	err := p.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/prices", retryable: true}, &out)
	return out.items, err
}

// SetPrice sets the organisation's price of a model.
func (p *ProvidersService) SetPrice(ctx context.Context, ps PriceSet) (Price, error) {
	var out Price
	err := p.c.do(ctx, request{method: http.MethodPut, path: "/api/v1/admin/prices", body: ps, retryable: true}, &out)
	return out, err
}

// DeletePrice removes the organisation's price of a model; the default applies again.
func (p *ProvidersService) DeletePrice(ctx context.Context, kind, model string) error {
	return p.c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/admin/prices",
		query: url.Values{"providerKind": {kind}, "model": {model}}, retryable: true}, nil)
}
