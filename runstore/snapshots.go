package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Snapshots (run_snapshots) keep a resumed run's replay short: a tier folds the journal's
// answers into a state and saves it now and then under a key of its own; a resumed attempt
// starts from the newest state and replays only the journal entries written after it. A
// snapshot is an optimisation, never the record: the journal is, and a tier that cannot use
// a snapshot replays the journal from the start. One row per key holds the newest state,
// numbered by the tier (seq); a lower or equal seq never replaces a higher one.

// QueueSnapshot adds to b the statement that saves state as the snapshot seq of the run's
// key, unless a snapshot with seq or a higher one is stored already.
func QueueSnapshot(b *pgx.Batch, runID, key string, seq int, state json.RawMessage) {
	b.Queue(saveSnapshotSQL, runID, key, seq, string(state))
}

// SaveSnapshot saves state as the snapshot seq of the run's key (see QueueSnapshot).
func (s *Store) SaveSnapshot(ctx context.Context, runID, key string, seq int, state json.RawMessage) error {
	if _, err := s.db.Exec(ctx, saveSnapshotSQL, runID, key, seq, string(state)); err != nil {
		return fmt.Errorf("saving snapshot %s: %w", key, err)
	}
	return nil
}

// LoadSnapshot returns the newest snapshot of the run's key and its seq; ok is false when
// the key has none.
func (s *Store) LoadSnapshot(ctx context.Context, runID, key string) (seq int, state json.RawMessage, ok bool, err error) {
	var raw []byte
	err = s.db.QueryRow(ctx, loadSnapshotSQL, runID, key).Scan(&seq, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("reading snapshot %s: %w", key, err)
	}
	return seq, raw, true, nil
}
