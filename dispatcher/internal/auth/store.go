package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// DB is what the key store needs of a pool or a transaction.
type DB = postgres.Querier

// ErrUnknownKey is returned for a key that does not exist, is revoked or does not match.
var ErrUnknownKey = errors.New("unknown or revoked api key")

// Authenticate resolves a presented key to its principal.
func Authenticate(ctx context.Context, db DB, key string) (Principal, error) {
	prefix, err := Parse(key)
	if err != nil {
		return Principal{}, ErrUnknownKey
	}
	p, hash, err := Lookup(ctx, db, prefix)
	if errors.Is(err, ErrUnknownKey) {
		// Compare anyway so a missing prefix costs what a wrong secret costs.
		Matches(key, make([]byte, 32))
		return Principal{}, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, err
	}
	if !Matches(key, hash) {
		return Principal{}, ErrUnknownKey
	}
	return p, nil
}

// Lookup returns the principal and stored hash of the unrevoked key with a prefix; the
// caller compares the hash.
func Lookup(ctx context.Context, db DB, prefix string) (Principal, []byte, error) {
	var p Principal
	var hash []byte
	var roles []string
	err := db.QueryRow(ctx, `SELECT id, COALESCE(org_id::text, ''), name, secret_hash, roles FROM api_keys
		WHERE prefix = $1 AND revoked_at IS NULL`, prefix).Scan(&p.KeyID, &p.OrgID, &p.KeyName, &hash, &roles)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, nil, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, nil, fmt.Errorf("looking up api key: %w", err)
	}
	for _, r := range roles {
		p.Roles = append(p.Roles, Role(r))
	}
	return p, hash, nil
}

// KeyInfo describes a stored key; the secret is never returned after creation.
type KeyInfo = apitypes.Key

// CreateOperator stores a new platform operator key and returns it in plaintext, once.
func CreateOperator(ctx context.Context, db DB, name, by string) (string, KeyInfo, error) {
	return Create(ctx, db, "", name, []Role{RoleOperator}, by)
}

// Create stores a new key for an organisation (orgID "" with RoleOperator alone: an
// operator key) and returns it in plaintext, once.
func Create(ctx context.Context, db DB, orgID, name string, roles []Role, by string) (string, KeyInfo, error) {
	key, prefix, hash, err := NewKey()
	if err != nil {
		return "", KeyInfo{}, err
	}
	rs := make([]string, len(roles))
	for i, r := range roles {
		rs[i] = string(r)
	}
	var info KeyInfo
	err = db.QueryRow(ctx, `INSERT INTO api_keys (org_id, name, prefix, secret_hash, roles, created_by)
		VALUES (NULLIF($1, '')::uuid, $2, $3, $4, $5, $6)
		RETURNING id, name, prefix, roles, created_by, created_at, last_used_at, revoked_at`,
		orgID, name, prefix, hash, rs, by).Scan(&info.ID, &info.Name, &info.Prefix, &info.Roles,
		&info.CreatedBy, &info.CreatedAt, &info.LastUsedAt, &info.RevokedAt)
	if err != nil {
		return "", KeyInfo{}, fmt.Errorf("creating api key: %w", err)
	}
	return key, info, nil
}

// List returns an organisation's keys (orgID "": the operator keys), newest first.
func List(ctx context.Context, db DB, orgID string) ([]KeyInfo, error) {
	rows, err := db.Query(ctx, `SELECT id, name, prefix, roles, created_by, created_at, last_used_at, revoked_at
		FROM api_keys WHERE org_id IS NOT DISTINCT FROM NULLIF($1, '')::uuid ORDER BY created_at DESC`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing api keys: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[KeyInfo])
}

// Revoke revokes one of an organisation's keys (orgID "": an operator key). It reports
// false when there is no such key.
func Revoke(ctx context.Context, db DB, orgID, keyID string) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM NULLIF($2, '')::uuid`, keyID, orgID)
	if err != nil {
		return false, fmt.Errorf("revoking api key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ByID resolves a key id (from a browser session) to its principal; a revoked key is
// ErrUnknownKey.
func ByID(ctx context.Context, db DB, keyID string) (Principal, error) {
	var p Principal
	var roles []string
	err := db.QueryRow(ctx, `SELECT id, COALESCE(org_id::text, ''), name, roles FROM api_keys WHERE id = $1 AND revoked_at IS NULL`, keyID).
		Scan(&p.KeyID, &p.OrgID, &p.KeyName, &roles)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("looking up api key: %w", err)
	}
	for _, r := range roles {
		p.Roles = append(p.Roles, Role(r))
	}
	return p, nil
}
