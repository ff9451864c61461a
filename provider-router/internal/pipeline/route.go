package pipeline

import (
	"context"

	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
)

// Route picks the organisation's provider and model for the call (routing.Resolver: the
// hint, the model override, the user's preference) and points the request at that model.
// The router answers whole: the request is never streamed upstream unless Call.Stream.
type Route struct {
	Next   Chatter
	Routes *routing.Resolver
}

// Chat resolves call.Route and calls on.
func (l *Route) Chat(ctx context.Context, call *Call) (*Result, error) {
	var route routing.Route
	var err error
	if call.Provider != "" {
		route, err = l.Routes.ResolveProvider(ctx, call.OrgID, call.Provider, call.Hint, call.ModelOverride)
	} else {
		route, err = l.Routes.Resolve(ctx, call.OrgID, call.Hint, call.ModelOverride, call.Preference)
	}
	if err != nil {
		return nil, err
	}
	call.Route = route
	call.Req.Model = route.Model
	call.Req.Stream = false
	call.Req.StreamOptions = nil
	return l.Next.Chat(ctx, call)
}
