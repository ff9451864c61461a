// Package auth identifies callers: API keys (Bearer) scoped to one organisation, each with
// roles. Keys are stored as SHA-256 hashes and compared in constant time; the plaintext is
// shown once, when the key is created.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
)

// Role is what a key may do.
type Role string

// The roles of an organisation's keys. Admin implies every other one of them.
const (
	RoleDispatch    Role = "dispatch"
	RoleApprove     Role = "approve"
	RoleSkillsAdmin Role = "skills_admin"
	RoleViewer      Role = "viewer"
	RoleAdmin       Role = "admin"
)

// RoleOperator is a platform operator's: it creates, changes, suspends and resumes
// organisations and issues their first admin key. An operator key belongs to no
// organisation, holds no other role and is implied by none, so it reads no organisation's
// runs, and no organisation's admin is an operator.
const RoleOperator Role = "operator"

// AllRoles lists every role of an organisation's keys (not RoleOperator).
var AllRoles = []Role{RoleDispatch, RoleApprove, RoleSkillsAdmin, RoleViewer, RoleAdmin}

// Principal is an authenticated caller.
type Principal struct {
	OrgID   string
	KeyID   string
	KeyName string
	Roles   []Role
}

// Has reports whether the principal holds role (admins hold every role of an
// organisation, never RoleOperator).
func (p Principal) Has(role Role) bool {
	if role == RoleOperator {
		return p.Operator()
	}
	return slices.Contains(p.Roles, role) || slices.Contains(p.Roles, RoleAdmin)
}

// Operator reports whether the principal is a platform operator: a key of no organisation
// with the operator role.
func (p Principal) Operator() bool {
	return p.OrgID == "" && slices.Contains(p.Roles, RoleOperator)
}

// Actor names the principal in audit records: "key:<name>".
func (p Principal) Actor() string { return "key:" + p.KeyName }

const keyPrefix = "sy_"

// NewKey returns a fresh API key "sy_<prefix>_<secret>", its lookup prefix and its hash.
func NewKey() (key, prefix string, hash []byte, err error) {
	b := make([]byte, 6+24)
	if _, err := rand.Read(b); err != nil {
		return "", "", nil, err
	}
	prefix = hex.EncodeToString(b[:6])
	key = keyPrefix + prefix + "_" + hex.EncodeToString(b[6:])
	return key, prefix, Hash(key), nil
}

// ErrMalformed is returned for a string that cannot be an API key.
var ErrMalformed = errors.New("malformed api key")

// Parse returns the lookup prefix of a key.
func Parse(key string) (prefix string, err error) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", ErrMalformed
	}
	prefix, secret, ok := strings.Cut(rest, "_")
	if !ok || len(prefix) != 12 || len(secret) != 48 {
		return "", ErrMalformed
	}
	return prefix, nil
}

// Hash is the stored form of a key.
func Hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Matches compares a presented key with a stored hash in constant time.
func Matches(key string, hash []byte) bool {
	return subtle.ConstantTimeCompare(Hash(key), hash) == 1
}
