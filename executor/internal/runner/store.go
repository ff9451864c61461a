package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ledgerStart inserts a side-effecting call's ledger row before the call. It reports false
// when the key is in the ledger already: that call was made (or begun) before.
func ledgerStart(ctx context.Context, db *pgxpool.Pool, key, runID, orgID, toolName, step string, args json.RawMessage) (bool, error) {
	tag, err := db.Exec(ctx, `INSERT INTO tool_calls (idempotency_key, run_id, org_id, tool_name, step_key, arguments, status)
		VALUES ($1, $2, $3, $4, $5, $6, 'started') ON CONFLICT (idempotency_key) DO NOTHING`,
		key, runID, orgID, toolName, step, []byte(args))
	if err != nil {
		return false, fmt.Errorf("recording tool call %s in the ledger: %w", step, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ledgerGet returns a ledger row's status and stored response.
func ledgerGet(ctx context.Context, db *pgxpool.Pool, key string) (string, []byte, error) {
	var status string
	var resp []byte
	if err := db.QueryRow(ctx, `SELECT status, response FROM tool_calls WHERE idempotency_key = $1`, key).
		Scan(&status, &resp); err != nil {
		return "", nil, fmt.Errorf("reading tool-call ledger: %w", err)
	}
	return status, resp, nil
}

// ledgerFinish records a side-effecting call's outcome.
func ledgerFinish(ctx context.Context, db *pgxpool.Pool, key, status string, response any) error {
	raw, err := json.Marshal(response)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `UPDATE tool_calls SET status = $2, response = $3, completed_at = now()
		WHERE idempotency_key = $1`, key, status, raw); err != nil {
		return fmt.Errorf("recording tool call outcome in the ledger: %w", err)
	}
	return nil
}

type review struct {
	Decision, Reviewer, Reason string
}

// latestReview returns the run's newest review written at or after since.
func latestReview(ctx context.Context, db *pgxpool.Pool, runID string, since time.Time) (review, bool, error) {
	var r review
	err := db.QueryRow(ctx, `SELECT decision, reviewer, reason FROM reviews
		WHERE run_id = $1 AND created_at >= $2 ORDER BY created_at DESC LIMIT 1`, runID, since).
		Scan(&r.Decision, &r.Reviewer, &r.Reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("reading reviews of run %s: %w", runID, err)
	}
	return r, true, nil
}
