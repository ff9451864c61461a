package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
)

// Live is what the WebSocket stream reads from Postgres: the event journal for replay and
// which chain a run belongs to (from the run store), and whether a chain exists.
type Live struct {
	DB *pgxpool.Pool
}

// Replay returns the run's journaled events with seq greater than after, in order.
func (l Live) Replay(ctx context.Context, orgID, runID string, after int64) ([]event.Envelope, error) {
	return runstore.New(l.DB).Replay(ctx, orgID, runID, after)
}

// RunChain returns the chain a run of the organisation belongs to ("" for none), or
// ErrNotFound when the organisation has no such run.
func (l Live) RunChain(ctx context.Context, orgID, runID string) (string, error) {
	chainID, err := runstore.New(l.DB).RunChain(ctx, orgID, runID)
	if errors.Is(err, runstore.ErrNotFound) {
		return "", ErrNotFound
	}
	return chainID, err
}

// ChainRuns returns the runs of one of the organisation's chains in creation order, or
// ErrNotFound when the organisation has no such chain.
func (l Live) ChainRuns(ctx context.Context, orgID, chainID string) ([]string, error) {
	var exists bool
	if err := l.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chains WHERE id = $1 AND org_id = $2)`,
		chainID, orgID).Scan(&exists); err != nil {
		return nil, fmt.Errorf("reading chain %s: %w", chainID, err)
	}
	if !exists {
		return nil, ErrNotFound
	}
	return runstore.New(l.DB).ChainRuns(ctx, orgID, chainID)
}
