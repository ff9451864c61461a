package credential

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoKeyRing is returned when a credential must be read or written but the router was
// started without a key ring.
var ErrNoKeyRing = errors.New("credential: no key ring configured (SWITCHYARD_ROUTER_KEYS_FILE or SWITCHYARD_ROUTER_KEYS)")

// ErrNoProvider is returned by Set for an organisation or provider name that does not exist.
var ErrNoProvider = errors.New("credential: no such organisation or provider")

// Store reads and writes provider_credentials. Decrypted secrets are cached for TTL (at
// most 60 s) and dropped at once by Invalidate, which the registry watcher calls when a
// row changes.
type Store struct {
	DB   *pgxpool.Pool
	Ring *KeyRing // nil: no credentials can be opened
	// TTL is how long a decrypted secret is reused; default and maximum 60 s.
	TTL time.Duration

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	secret  Secret
	version time.Time // created_at or rotated_at, for the adapter cache
	found   bool
	until   time.Time
}

func (s *Store) ttl() time.Duration {
	if s.TTL <= 0 || s.TTL > time.Minute {
		return time.Minute
	}
	return s.TTL
}

// Get returns the decrypted credential of a provider config and a version that changes
// whenever the credential does. found=false: the provider has no credential (local
// servers such as sim-llm need none).
func (s *Store) Get(ctx context.Context, providerConfigID string) (secret Secret, version time.Time, found bool, err error) {
	now := time.Now()
	s.mu.Lock()
	if e, ok := s.cache[providerConfigID]; ok && now.Before(e.until) {
		s.mu.Unlock()
		return e.secret, e.version, e.found, nil
	}
	s.mu.Unlock()

	var keyID string
	var nonce, ct []byte
	err = s.DB.QueryRow(ctx, `SELECT key_id, nonce, ciphertext, COALESCE(rotated_at, created_at)
		FROM provider_credentials WHERE provider_config_id = $1`, providerConfigID).Scan(&keyID, &nonce, &ct, &version)
	e := entry{until: now.Add(s.ttl())}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return "", time.Time{}, false, fmt.Errorf("reading the credential of provider %s: %w", providerConfigID, err)
	default:
		if s.Ring == nil {
			return "", time.Time{}, false, ErrNoKeyRing
		}
		pt, err := s.Ring.Open(keyID, nonce, ct, []byte(providerConfigID))
		if err != nil {
			return "", time.Time{}, false, fmt.Errorf("opening the credential of provider %s: %w", providerConfigID, err)
		}
		e.secret, e.version, e.found = Secret(pt), version, true
	}
	s.mu.Lock()
	if s.cache == nil {
		s.cache = map[string]entry{}
	}
	s.cache[providerConfigID] = e
	s.mu.Unlock()
	return e.secret, e.version, e.found, nil
}

// Invalidate drops a cached credential ("" drops all).
func (s *Store) Invalidate(providerConfigID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if providerConfigID == "" {
		clear(s.cache)
		return
	}
	delete(s.cache, providerConfigID)
}

// Set encrypts secret under the current key and stores it as the credential of the
// organisation's provider (by org slug and provider name), replacing any previous one.
func (s *Store) Set(ctx context.Context, orgSlug, providerName string, secret Secret) error {
	if s.Ring == nil {
		return ErrNoKeyRing
	}
	var id string
	err := s.DB.QueryRow(ctx, `SELECT pc.id FROM provider_configs pc JOIN orgs o ON o.id = pc.org_id
		WHERE o.slug = $1 AND pc.name = $2`, orgSlug, providerName).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: org %q provider %q", ErrNoProvider, orgSlug, providerName)
	}
	if err != nil {
		return fmt.Errorf("finding provider %q of org %q: %w", providerName, orgSlug, err)
	}
	keyID, nonce, ct, err := s.Ring.Seal([]byte(secret), []byte(id))
	if err != nil {
		return fmt.Errorf("encrypting: %w", err)
	}
	if _, err := s.DB.Exec(ctx, `INSERT INTO provider_credentials (provider_config_id, key_id, nonce, ciphertext)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (provider_config_id) DO UPDATE SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
			ciphertext = EXCLUDED.ciphertext, created_at = now(), rotated_at = NULL`, id, keyID, nonce, ct); err != nil {
		return fmt.Errorf("storing the credential of provider %q: %w", providerName, err)
	}
	s.Invalidate(id)
	return nil
}

// Rotate re-encrypts every credential not under the current key and returns how many it
// changed. Rows are locked one transaction at a time; routers keep serving throughout,
// since they decrypt under any key of their ring.
func (s *Store) Rotate(ctx context.Context) (int, error) {
	if s.Ring == nil {
		return 0, ErrNoKeyRing
	}
	n := 0
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT provider_config_id, key_id, nonce, ciphertext FROM provider_credentials
			WHERE key_id <> $1 FOR UPDATE`, s.Ring.Current())
		if err != nil {
			return err
		}
		type row struct {
			id, keyID string
			nonce, ct []byte
		}
		old, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.id, &x.keyID, &x.nonce, &x.ct)
		})
		if err != nil {
			return err
		}
		for _, r := range old {
			pt, err := s.Ring.Open(r.keyID, r.nonce, r.ct, []byte(r.id))
			if err != nil {
				return fmt.Errorf("provider %s: %w", r.id, err)
			}
			keyID, nonce, ct, err := s.Ring.Seal(pt, []byte(r.id))
			clear(pt)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE provider_credentials SET key_id = $2, nonce = $3, ciphertext = $4,
				rotated_at = now() WHERE provider_config_id = $1`, r.id, keyID, nonce, ct); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rotating credentials: %w", err)
	}
	s.Invalidate("")
	return n, nil
}
