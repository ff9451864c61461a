package api

import (
	"context"
	"encoding/json"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// runReader is what the API's read routes use of the run store (runstore.Store).
type runReader interface {
	GetRun(ctx context.Context, orgID, id string) (runstore.Run, error)
	ListRuns(ctx context.Context, orgID string, f runstore.ListFilter) ([]runstore.Run, error)
	ListSpans(ctx context.Context, orgID, runID string) ([]span.Span, error)
	Replay(ctx context.Context, orgID, runID string, after int64) ([]event.Envelope, error)
	SkillSnapshot(ctx context.Context, runID string, dst any) error
	LastEventData(ctx context.Context, runID, typ string) (json.RawMessage, error)
}

var _ runReader = (*runstore.Store)(nil)

// runs is the run store on the server's pool.
func (s *Server) runs() runReader { return runstore.New(s.DB) }
