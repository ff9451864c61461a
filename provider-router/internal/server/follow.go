package server

import (
	"context"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/registry"
)

// OnRegistryChange drops or reloads what a registry change touched; it is the registry
// watcher's OnChange. Limits are pushed into the shared buckets (every replica does the
// same idempotent write), the rest are local caches.
func (s *Server) OnRegistryChange(ctx context.Context, c registry.Change) {
	switch c.Table {
	case "provider_configs", "routing_policies":
		s.Routes.Invalidate(c.OrgID)
	case "prices", "org_prices":
		s.Prices.Invalidate()
	case "provider_credentials":
		if s.Credentials != nil {
			s.Credentials.Invalidate(c.ProviderConfigID)
		}
	case "orgs":
		s.Routes.Invalidate(c.OrgID)
		if s.Budget != nil {
			s.Budget.InvalidateOrg(c.OrgID)
		}
	case "provider_limits":
		if s.Limiter == nil {
			return
		}
		key := limiter.BucketKey{Credential: c.ProviderConfigID, Model: c.Model}
		l, _, err := registry.Limits(s.DB)(ctx, key)
		if err == nil {
			err = s.Limiter.SetLimits(ctx, key, l) // no row: 0/0, unlimited
		}
		if err != nil {
			s.Log.Warn("applying changed provider limits", "bucket", key.String(), "error", err)
		}
	}
}

// OnRegistryReset reloads everything after the watcher (re)connected: changes made while
// it was not listening were missed.
func (s *Server) OnRegistryReset(ctx context.Context) {
	s.Routes.Invalidate("")
	s.Prices.Invalidate()
	if s.Credentials != nil {
		s.Credentials.Invalidate("")
	}
	if s.Budget != nil {
		s.Budget.InvalidateOrg("")
	}
	if s.Limiter == nil {
		return
	}
	all, err := registry.AllLimits(ctx, s.DB)
	if err != nil {
		s.Log.Warn("reloading provider limits", "error", err)
		return
	}
	for key, l := range all {
		if err := s.Limiter.SetLimits(ctx, key, l); err != nil {
			s.Log.Warn("reloading provider limits", "bucket", key.String(), "error", err)
		}
	}
}
