package handoff

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// RunStopped reports from the runs table whether a run was asked to stop (cancelled) or
// has ended. A run the table does not hold is not stopped.
func RunStopped(db *pgxpool.Pool) func(ctx context.Context, runID string) (bool, error) {
	return func(ctx context.Context, runID string) (bool, error) {
		var status string
		var cancelled bool
		err := db.QueryRow(ctx, `SELECT status, cancel_requested_at IS NOT NULL FROM runs WHERE id = $1`, runID).
			Scan(&status, &cancelled)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading the state of run %s: %w", runID, err)
		}
		return cancelled || run.Status(status).Terminal(), nil
	}
}
