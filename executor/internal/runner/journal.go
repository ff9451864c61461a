package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// journaled returns the journal entry stored under step, if any. A run's first attempt has
// none to find and does not look: an attempt racing it is resumed and does, and journal
// refuses a step written twice.
func (x *execution) journaled(ctx context.Context, step string, dst any) (bool, error) {
	if !x.resumed {
		return false, nil
	}
	var raw []byte
	err := x.DB.QueryRow(ctx, `SELECT data FROM run_journal WHERE run_id = $1 AND step_key = $2`, x.run.ID, step).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading journal step %s: %w", step, err)
	}
	return true, json.Unmarshal(raw, dst)
}

// journal appends an entry under step. It reports false when the step was journaled
// already (by an earlier attempt), in which case nothing was written.
func journal(ctx context.Context, db run.DB, runID, step, kind string, data any) (bool, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, `INSERT INTO run_journal (run_id, step_key, kind, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (run_id, step_key) DO NOTHING`, runID, step, kind, raw)
	if err != nil {
		return false, fmt.Errorf("journaling step %s: %w", step, err)
	}
	return tag.RowsAffected() == 1, nil
}
