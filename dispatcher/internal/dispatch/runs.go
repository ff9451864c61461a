package dispatch

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/runstore"
)

// runStore is what the pipeline and the controls use of the run store (runstore.Store);
// statements that must share a transaction with the dispatcher's own (a review) use
// runstore.New on the transaction instead.
type runStore interface {
	GetRun(ctx context.Context, orgID, id string) (runstore.Run, error)
	GetEnqueueInfo(ctx context.Context, id string) (runstore.EnqueueInfo, error)
	RequestCancel(ctx context.Context, orgID, id string) (bool, error)
	RunsByIdempotencyKeys(ctx context.Context, orgID string, keys []string) (map[string]runstore.KeyedRun, error)
	DeleteRuns(ctx context.Context, orgID string, ids []string) error
	InsertBatch(ctx context.Context, id, orgID string, size int) error
	SendBatch(ctx context.Context, b *pgx.Batch) error
	liveCounter
}

// liveCounter counts an organisation's live runs, for its backlog.
type liveCounter interface {
	LiveRuns(ctx context.Context, orgID string, limit int) (int64, error)
}

var _ runStore = (*runstore.Store)(nil)

// runs is the run store on the service's pool.
func (s *Service) runs() runStore { return runstore.New(s.DB) }
