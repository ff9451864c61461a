package pipeline

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/adapters"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Credential opens the route's provider credential and sets call.Adapter: the adapter of
// the provider config with its current key, built once and rebuilt when the config or the
// credential changed. Without a Store providers are called without a key.
type Credential struct {
	Next       Chatter
	Store      *credential.Store
	HTTPClient *http.Client

	mu       sync.Mutex
	adapters map[string]cachedAdapter
}

type cachedAdapter struct {
	adapter provider.Adapter
	version time.Time
	credVer time.Time
}

// Chat sets call.Adapter and calls on.
func (l *Credential) Chat(ctx context.Context, call *Call) (*Result, error) {
	a, err := l.adapter(ctx, call)
	if err != nil {
		return nil, err
	}
	call.Adapter = a
	return l.Next.Chat(ctx, call)
}

func (l *Credential) adapter(ctx context.Context, call *Call) (provider.Adapter, error) {
	route := call.Route
	var key string
	var credVer time.Time
	if l.Store != nil {
		secret, ver, found, err := l.Store.Get(ctx, route.ProviderID)
		if revoked, ok := errors.AsType[*credential.RevokedError](err); ok {
			return nil, apierr.New(http.StatusFailedDependency, apierr.CodeCredentialRevoked,
				"The API key of provider "+route.ProviderName+" was revoked; the provider was not called.",
				"An admin sets a new key: `yard providers set-key "+route.ProviderName+"` or PUT /api/v1/admin/providers/"+route.ProviderName+"/credential.").
				With("provider", route.ProviderName, "revoked_at", revoked.At.UTC())
		}
		if err != nil {
			return nil, apierr.New(http.StatusServiceUnavailable, apierr.CodeCredentialUnavailable,
				"The router could not open the credential of provider "+route.ProviderName+".",
				"Operators: check the router's identity (SWITCHYARD_ROUTER_IDENTITY_FILE) holds the key the credential was sealed to, or, for older credentials, its key ring (SWITCHYARD_ROUTER_KEYS_FILE).").
				With("provider", route.ProviderName).Wrap(err)
		}
		if found {
			key, credVer = secret.Reveal(), ver
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.adapters[route.ProviderID]; ok && a.version.Equal(route.UpdatedAt) && a.credVer.Equal(credVer) {
		return a.adapter, nil
	}
	a, err := adapters.New(provider.Config{Kind: route.Kind, BaseURL: route.BaseURL, APIKey: key, HTTPClient: l.HTTPClient})
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if l.adapters == nil {
		l.adapters = map[string]cachedAdapter{}
	}
	l.adapters[route.ProviderID] = cachedAdapter{adapter: a, version: route.UpdatedAt, credVer: credVer}
	return a, nil
}
