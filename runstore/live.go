package runstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunChain returns the chain a run of the organisation belongs to ("" for none), or
// ErrNotFound when the organisation has no such run.
func (s *Store) RunChain(ctx context.Context, orgID, runID string) (string, error) {
	var chainID string
	err := s.db.QueryRow(ctx, runChainSQL, runID, orgID).Scan(&chainID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading chain of run %s: %w", runID, err)
	}
	return chainID, nil
}

// ChainRuns returns the ids of the runs of one of the organisation's chains, in creation
// order.
func (s *Store) ChainRuns(ctx context.Context, orgID, chainID string) ([]string, error) {
	rows, err := s.db.Query(ctx, chainRunsSQL, chainID, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing runs of chain %s: %w", chainID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Stranded is a live run that has not been updated for a while: the reconciler checks
// that its task is still in Redis.
type Stranded struct {
	ID, Queue, Priority, Status string
}

// StrandedRuns returns up to 500 runs queued or running whose last update is older than
// grace, oldest first.
func (s *Store) StrandedRuns(ctx context.Context, grace time.Duration) ([]Stranded, error) {
	rows, err := s.db.Query(ctx, strandedSQL, grace.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Stranded])
}
