// Package session keeps browser sign-ins: an API key is checked once and exchanged for an
// opaque session token in an HttpOnly cookie, so the key never sits in a URL or in browser
// storage. Sessions live in Redis (only the token's hash is stored) and are re-checked
// against the key on every request, so revoking the key ends its sessions.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// CookieName is the session cookie.
const CookieName = "sy_session"

// TTL is how long a session lasts without use.
const TTL = 12 * time.Hour

// ErrNoSession is returned for an unknown or expired token.
var ErrNoSession = errors.New("no such session")

// Session is what a token stands for.
type Session struct {
	KeyID string    `json:"key_id"`
	OrgID string    `json:"org_id"`
	At    time.Time `json:"at"`
}

// Store keeps sessions in Redis.
type Store struct {
	Redis redis.UniversalClient
}

func key(token string) string {
	h := sha256.Sum256([]byte(token))
	return "sy:session:" + hex.EncodeToString(h[:])
}

// Create starts a session for an API key and returns its token.
func (s *Store) Create(ctx context.Context, keyID, orgID string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	v, _ := json.Marshal(Session{KeyID: keyID, OrgID: orgID, At: time.Now().UTC()})
	if err := s.Redis.Set(ctx, key(token), v, TTL).Err(); err != nil {
		return "", fmt.Errorf("storing session: %w", err)
	}
	return token, nil
}

// Get returns the session of a token and extends it.
func (s *Store) Get(ctx context.Context, token string) (Session, error) {
	if len(token) != 64 {
		return Session{}, ErrNoSession
	}
	v, err := s.Redis.GetEx(ctx, key(token), TTL).Bytes()
	if errors.Is(err, redis.Nil) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("reading session: %w", err)
	}
	var sess Session
	if err := json.Unmarshal(v, &sess); err != nil {
		return Session{}, ErrNoSession
	}
	return sess, nil
}

// Delete ends a session.
func (s *Store) Delete(ctx context.Context, token string) error {
	return s.Redis.Del(ctx, key(token)).Err()
}
