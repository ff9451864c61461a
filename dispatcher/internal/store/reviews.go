package store

import (
	"context"
	"fmt"
)

// InsertReview records a reviewer's decision.
func InsertReview(ctx context.Context, db DB, runID, orgID, decision, reviewer, reason string) error {
	_, err := db.Exec(ctx, `INSERT INTO reviews (run_id, org_id, decision, reviewer, reason) VALUES ($1, $2, $3, $4, $5)`,
		runID, orgID, decision, reviewer, reason)
	if err != nil {
		return fmt.Errorf("recording review: %w", err)
	}
	return nil
}
