package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStore is the Store on the registry and runs tables.
type PGStore struct{ DB *pgxpool.Pool }

// Spent returns runs.cost_usd or chains.cost_usd (0 for a row that does not exist yet).
func (s PGStore) Spent(ctx context.Context, scope Scope, id string) (float64, error) {
	q := `SELECT cost_usd::float8 FROM runs WHERE id = $1`
	if scope == ScopeChain {
		q = `SELECT cost_usd::float8 FROM chains WHERE id = $1`
	}
	var v float64
	err := s.DB.QueryRow(ctx, q, id).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// ChainCeiling returns chains.cost_ceiling_usd.
func (s PGStore) ChainCeiling(ctx context.Context, chainID string) (float64, bool, error) {
	var v *float64
	err := s.DB.QueryRow(ctx, `SELECT cost_ceiling_usd::float8 FROM chains WHERE id = $1`, chainID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && v == nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the ceiling of chain %s: %w", chainID, err)
	}
	return *v, true, nil
}

// Quota returns orgs.monthly_token_quota (ok=false when NULL: unlimited).
func (s PGStore) Quota(ctx context.Context, orgID string) (int64, bool, error) {
	var v *int64
	err := s.DB.QueryRow(ctx, `SELECT monthly_token_quota FROM orgs WHERE id = $1`, orgID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && v == nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the quota of org %s: %w", orgID, err)
	}
	return *v, true, nil
}

// MonthUsage returns org_monthly_usage.tokens for the month (0 when absent).
func (s PGStore) MonthUsage(ctx context.Context, orgID string, month time.Time) (int64, error) {
	var v int64
	err := s.DB.QueryRow(ctx, `SELECT tokens FROM org_monthly_usage WHERE org_id = $1 AND month = $2`,
		orgID, month).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}
