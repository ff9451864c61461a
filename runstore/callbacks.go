package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DueCallback is a finished run whose callback is due, claimed for one delivery.
type DueCallback struct {
	ID, OrgID, URL, Secret string
	Allow                  []string
	Attempts               int
}

// ClaimCallbacks claims up to 20 runs whose callback is due, with a 60-second lease: a
// crashed sender's claims come due again after it.
func (s *Store) ClaimCallbacks(ctx context.Context) ([]DueCallback, error) {
	rows, err := s.db.Query(ctx, claimCallbacksSQL)
	if err != nil {
		return nil, fmt.Errorf("claiming callbacks: %w", err)
	}
	dues, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DueCallback])
	if err != nil {
		return nil, fmt.Errorf("claiming callbacks: %w", err)
	}
	return dues, nil
}

// RetryCallback records a failed delivery (attempts made so far) and schedules the next
// one after delay.
func (s *Store) RetryCallback(ctx context.Context, runID string, attempts int, delay time.Duration) error {
	_, err := s.db.Exec(ctx, callbackRetrySQL, runID, attempts, delay.String())
	return err
}

// EndCallback records the last delivery of a run's callback: status is delivered, failed
// or refused.
func (s *Store) EndCallback(ctx context.Context, runID string, attempts int, status string) error {
	_, err := s.db.Exec(ctx, callbackDoneSQL, runID, attempts, status)
	return err
}
