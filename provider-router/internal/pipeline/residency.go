package pipeline

import (
	"context"

	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
)

// Residency refuses a call whose route leaves the skill's jurisdiction (X-Data-Residency)
// before anything is reserved or waited for; there is no fallback to another provider.
type Residency struct {
	Next Chatter
}

// Chat checks call.Route against call.Residency and calls on.
func (l *Residency) Chat(ctx context.Context, call *Call) (*Result, error) {
	if err := routing.CheckResidency(call.Route, call.Residency); err != nil {
		return nil, err
	}
	return l.Next.Chat(ctx, call)
}
