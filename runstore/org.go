package runstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/unfinished_runs.sql
var unfinishedRunsSQL string

// UnfinishedRuns returns the ids of an organisation's runs that have not ended, chains'
// parent runs first: what suspending the organisation stops.
func (s *Store) UnfinishedRuns(ctx context.Context, orgID string) ([]string, error) {
	rows, err := s.db.Query(ctx, unfinishedRunsSQL, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing unfinished runs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
