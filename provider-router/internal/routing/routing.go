// Package routing decides which provider endpoint and model serve a call: the
// organisation's routing policy maps the job's routing hint to one of its enabled
// providers, and the model comes from the skill's override, the policy or the provider's
// model for that role. There is no silent fallback: a call that cannot be routed is an
// error naming the enabled providers and the policy.
package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Route is a resolved destination for one call.
type Route struct {
	ProviderID   string
	ProviderName string
	Kind         provider.Kind
	BaseURL      string
	Jurisdiction string
	Model        string
	UpdatedAt    time.Time
}

// Resolver reads routes from the registry, caching each organisation's providers and
// policy briefly so a change is followed within CacheTTL.
type Resolver struct {
	DB       *pgxpool.Pool
	CacheTTL time.Duration // default 5s

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	org     orgRouting
	expires time.Time
}

type providerRow struct {
	ID           string
	Name         string
	Kind         string
	BaseURL      string
	Jurisdiction string
	Models       map[string]string
	UpdatedAt    time.Time
}

type policyRow struct {
	Hint       string
	ProviderID string
	Model      string
}

type orgRouting struct {
	providers map[string]providerRow
	policy    map[string]policyRow
}

// The routing hints of ARCHITECTURE.md.
var validHints = map[string]bool{"fast": true, "reasoning": true, "code": true, "long_context": true,
	"creative": true, "default": true}

// Resolve returns the route for an organisation's call with a routing hint, an optional
// model override from the skill and an optional user preference. The preference names one
// of the organisation's enabled providers and is consulted only for the default hint (an
// empty hint or "auto" is the default hint); it picks that provider with its default model
// (or the override). A preference naming no enabled provider is ignored, not an error: it
// is a wish, and the organisation's policy still decides.
func (r *Resolver) Resolve(ctx context.Context, orgID, hint, modelOverride, preference string) (Route, error) {
	if hint == "" || hint == "auto" {
		hint = "default"
	}
	if !validHints[hint] {
		return Route{}, apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, "Unknown routing hint.",
			"Use one of fast, reasoning, code, long_context, creative, default.").With("routing_hint", hint)
	}
	org, err := r.load(ctx, orgID)
	if err != nil {
		return Route{}, err
	}
	if hint == "default" && preference != "" {
		for _, p := range org.providers {
			if p.Name != preference {
				continue
			}
			if model := firstNonEmpty(modelOverride, p.Models["default"]); model != "" {
				return Route{ProviderID: p.ID, ProviderName: p.Name, Kind: provider.Kind(p.Kind), BaseURL: p.BaseURL,
					Jurisdiction: p.Jurisdiction, Model: model, UpdatedAt: p.UpdatedAt}, nil
			}
		}
	}
	pol, ok := org.policy[hint]
	if !ok {
		return Route{}, routingFailed(org, hint, "the organisation's routing policy has no provider for this hint")
	}
	p, ok := org.providers[pol.ProviderID]
	if !ok {
		return Route{}, routingFailed(org, hint, "the policy names a provider that is disabled")
	}
	model := firstNonEmpty(modelOverride, pol.Model, p.Models[hint], p.Models["default"])
	if model == "" {
		return Route{}, routingFailed(org, hint, "the provider has no model for this hint and no default model")
	}
	return Route{ProviderID: p.ID, ProviderName: p.Name, Kind: provider.Kind(p.Kind), BaseURL: p.BaseURL,
		Jurisdiction: p.Jurisdiction, Model: model, UpdatedAt: p.UpdatedAt}, nil
}

// ResolveProvider routes a call to the organisation's enabled provider of that name, past
// the routing policy (X-Provider, a "Test connection" probe): the model is the override,
// else the provider's model for the hint, else its default model.
func (r *Resolver) ResolveProvider(ctx context.Context, orgID, name, hint, modelOverride string) (Route, error) {
	if hint == "" || hint == "auto" {
		hint = "default"
	}
	org, err := r.load(ctx, orgID)
	if err != nil {
		return Route{}, err
	}
	for _, p := range org.providers {
		if p.Name != name {
			continue
		}
		model := firstNonEmpty(modelOverride, p.Models[hint], p.Models["default"])
		if model == "" {
			return Route{}, routingFailed(org, hint, "provider "+name+" has no model for this hint and no default model")
		}
		return Route{ProviderID: p.ID, ProviderName: p.Name, Kind: provider.Kind(p.Kind), BaseURL: p.BaseURL,
			Jurisdiction: p.Jurisdiction, Model: model, UpdatedAt: p.UpdatedAt}, nil
	}
	return Route{}, routingFailed(org, hint, "provider "+name+" is not an enabled provider of the organisation")
}

// Invalidate drops an organisation's cached routing ("" drops every organisation's), so
// the next call reads the registry again.
func (r *Resolver) Invalidate(orgID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if orgID == "" {
		clear(r.cache)
		return
	}
	delete(r.cache, orgID)
}

// Residencies a skill may require (X-Data-Residency), and the provider jurisdictions
// each admits. "global" endpoints make no regional promise, so they serve only "any".
var residencyAdmits = map[string]map[string]bool{
	"":        {"eu": true, "us": true, "global": true},
	"any":     {"eu": true, "us": true, "global": true},
	"eu_only": {"eu": true},
	"us_only": {"us": true},
}

// CheckResidency refuses a route whose provider jurisdiction the skill's residency
// forbids. There is deliberately no fallback to another provider: the organisation's
// routing policy must name a provider in the right jurisdiction for that hint.
func CheckResidency(route Route, residency string) error {
	admits, ok := residencyAdmits[residency]
	if !ok {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, "Unknown data residency.",
			"Use any, eu_only or us_only.").With("residency", residency)
	}
	if !admits[route.Jurisdiction] {
		return apierr.New(http.StatusForbidden, apierr.CodeResidencyViolation,
			"The skill's data residency forbids the provider this call is routed to.",
			"Route the skill's hint to a provider endpoint in the required jurisdiction (e.g. a Vertex AI EU region), or change the skill's residency.").
			With("residency", residency, "provider", route.ProviderName, "jurisdiction", route.Jurisdiction)
	}
	return nil
}

func routingFailed(org orgRouting, hint, why string) *apierr.Error {
	enabled := []string{}
	for _, p := range org.providers {
		enabled = append(enabled, p.Name)
	}
	policy := map[string]string{}
	for h, pol := range org.policy {
		name := pol.ProviderID
		if p, ok := org.providers[pol.ProviderID]; ok {
			name = p.Name
		}
		policy[h] = name
	}
	return apierr.New(http.StatusUnprocessableEntity, apierr.CodeRoutingFailed, "No provider can serve this call: "+why+".",
		"Enable a provider and map the routing hint to it in the organisation's routing policy (admin API: /api/v1/admin/providers).").
		With("routing_hint", hint, "enabled_providers", enabled, "policy", policy)
}

func (r *Resolver) load(ctx context.Context, orgID string) (orgRouting, error) {
	ttl := r.CacheTTL
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	r.mu.Lock()
	if c, ok := r.cache[orgID]; ok && time.Now().Before(c.expires) {
		r.mu.Unlock()
		return c.org, nil
	}
	r.mu.Unlock()

	org := orgRouting{providers: map[string]providerRow{}, policy: map[string]policyRow{}}
	rows, err := r.DB.Query(ctx, `SELECT id, name, kind, base_url, jurisdiction, models, updated_at
		FROM provider_configs WHERE org_id = $1 AND enabled`, orgID)
	if err != nil {
		return org, dbError(err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (providerRow, error) {
		var p providerRow
		var models []byte
		err := row.Scan(&p.ID, &p.Name, &p.Kind, &p.BaseURL, &p.Jurisdiction, &models, &p.UpdatedAt)
		if err == nil {
			err = json.Unmarshal(models, &p.Models)
		}
		return p, err
	})
	if err != nil {
		return org, dbError(err)
	}
	for _, p := range ps {
		org.providers[p.ID] = p
	}
	rows, err = r.DB.Query(ctx, `SELECT hint, provider_config_id, model FROM routing_policies WHERE org_id = $1`, orgID)
	if err != nil {
		return org, dbError(err)
	}
	pols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[policyRow])
	if err != nil {
		return org, dbError(err)
	}
	for _, p := range pols {
		org.policy[p.Hint] = p
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = map[string]cached{}
	}
	r.cache[orgID] = cached{org: org, expires: time.Now().Add(ttl)}
	r.mu.Unlock()
	return org, nil
}

func dbError(err error) *apierr.Error {
	if errors.Is(err, context.Canceled) {
		return apierr.New(499, apierr.CodeCancelled, "The caller went away.")
	}
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeDatabaseUnavailable,
		"The router could not read the registry.", "Retry; operators: check PostgreSQL.").Wrap(fmt.Errorf("routing: %w", err))
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
