package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Digest names a stored skill snapshot: SHA-256 over the organisation's id and the
// snapshot's JSON bytes (SnapshotDigest).
type Digest [sha256.Size]byte

// Snapshot is a skill binding as its runs reference it: its JSON form, stored once per
// organisation and content in skill_snapshots (migration 00013) instead of in every run.
type Snapshot struct {
	OrgID  string
	Digest Digest
	JSON   json.RawMessage
}

// NewSnapshot encodes a binding of an organisation and digests it.
func NewSnapshot(orgID string, binding any) (Snapshot, error) {
	b, err := json.Marshal(binding)
	if err != nil {
		return Snapshot{}, fmt.Errorf("encoding skill snapshot: %w", err)
	}
	return Snapshot{OrgID: orgID, Digest: SnapshotDigest(orgID, b), JSON: b}, nil
}

// SnapshotDigest is the key of an organisation's snapshot: the organisation's id is hashed
// with the JSON so that two organisations' equal bindings are two rows, each going with its
// organisation. The zero byte separates the two parts.
func SnapshotDigest(orgID string, snapshot []byte) Digest {
	h := sha256.New()
	h.Write([]byte(orgID))
	h.Write([]byte{0})
	h.Write(snapshot)
	return Digest(h.Sum(nil))
}

// EnsureSnapshot stores a snapshot unless it is stored already. Rows are immutable and keyed
// by their content, so concurrent calls, from any process, are safe.
func EnsureSnapshot(ctx context.Context, db DB, s Snapshot) error {
	if _, err := db.Exec(ctx, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO NOTHING`, s.Digest[:], s.OrgID, []byte(s.JSON)); err != nil {
		return fmt.Errorf("storing skill snapshot %x: %w", s.Digest[:6], err)
	}
	return nil
}

// IsMissingSnapshot reports whether err is a run insert that referenced a snapshot no longer
// stored: nothing deletes one but its organisation's deletion, so only a hand-made deletion
// gets here, and whoever remembered the snapshot as stored must store it again.
func IsMissingSnapshot(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503" && pe.ConstraintName == "runs_skill_snapshot_digest_fkey"
}
