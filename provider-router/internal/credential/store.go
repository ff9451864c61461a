package credential

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/shared/providerstore"
)

// ErrNoKeyRing is returned when a credential must be read or written but the router was
// started without a key ring.
var ErrNoKeyRing = errors.New("credential: no key ring configured (SWITCHYARD_ROUTER_KEYS_FILE or SWITCHYARD_ROUTER_KEYS)")

// ErrNoProvider is returned by Set for an organisation or provider name that does not exist.
var ErrNoProvider = errors.New("credential: no such organisation or provider")

// ErrNoIdentity is returned for a credential sealed to the router's public key when the
// router was started without its identity.
var ErrNoIdentity = errors.New("credential: no identity configured (SWITCHYARD_ROUTER_IDENTITY_FILE)")

// RevokedError is a credential an admin revoked: calls to its provider fail until a new key
// is set.
type RevokedError struct{ At time.Time }

func (e *RevokedError) Error() string {
	return "credential: revoked at " + e.At.UTC().Format(time.RFC3339)
}

// Store opens provider_credentials: rows sealed with age to the router's public key (what
// the dispatcher writes, shared/providerstore) with the Identities, older rows sealed by
// the AES-GCM key ring with the Ring. Decrypted secrets are cached for TTL (at most 60 s)
// and dropped at once by Invalidate, which the registry watcher calls when a row changes.
type Store struct {
	DB         *pgxpool.Pool
	Identities *Identities // nil: age-sealed credentials cannot be opened
	Ring       *KeyRing    // nil: key-ring credentials cannot be opened
	// TTL is how long a decrypted secret is reused; default and maximum 60 s.
	TTL time.Duration

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	secret  Secret
	version time.Time // created_at or rotated_at, for the adapter cache
	found   bool
	revoked *RevokedError
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
// servers such as sim-llm need none). A revoked credential is a *RevokedError.
func (s *Store) Get(ctx context.Context, providerConfigID string) (secret Secret, version time.Time, found bool, err error) {
	now := time.Now()
	s.mu.Lock()
	if e, ok := s.cache[providerConfigID]; ok && now.Before(e.until) {
		s.mu.Unlock()
		if e.revoked != nil {
			return "", time.Time{}, false, e.revoked
		}
		return e.secret, e.version, e.found, nil
	}
	s.mu.Unlock()

	var scheme, keyID string
	var nonce, ct []byte
	var revokedAt *time.Time
	err = s.DB.QueryRow(ctx, `SELECT scheme, key_id, nonce, ciphertext, COALESCE(rotated_at, created_at), revoked_at
		FROM provider_credentials WHERE provider_config_id = $1`, providerConfigID).Scan(&scheme, &keyID, &nonce, &ct, &version, &revokedAt)
	e := entry{until: now.Add(s.ttl())}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return "", time.Time{}, false, fmt.Errorf("reading the credential of provider %s: %w", providerConfigID, err)
	case revokedAt != nil:
		e.revoked = &RevokedError{At: *revokedAt}
	default:
		pt, err := s.open(providerConfigID, scheme, keyID, nonce, ct)
		if err != nil {
			return "", time.Time{}, false, fmt.Errorf("opening the credential of provider %s: %w", providerConfigID, err)
		}
		e.secret, e.version, e.found = pt, version, true
	}
	s.mu.Lock()
	if s.cache == nil {
		s.cache = map[string]entry{}
	}
	s.cache[providerConfigID] = e
	s.mu.Unlock()
	if e.revoked != nil {
		return "", time.Time{}, false, e.revoked
	}
	return e.secret, e.version, e.found, nil
}

// open decrypts one row by its scheme.
func (s *Store) open(providerConfigID, scheme, keyID string, nonce, ct []byte) (Secret, error) {
	if scheme == providerstore.SchemeAge {
		if s.Identities == nil {
			return "", ErrNoIdentity
		}
		key, err := providerstore.Open(s.Identities.list(), providerConfigID, ct)
		return Secret(key), err
	}
	if s.Ring == nil {
		return "", ErrNoKeyRing
	}
	pt, err := s.Ring.Open(keyID, nonce, ct, []byte(providerConfigID))
	if err != nil {
		return "", err
	}
	defer clear(pt)
	return Secret(pt), nil
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

// Set stores secret as the credential of the organisation's provider (by org slug and
// provider name), replacing any previous one: sealed to the router's public key when the
// router has its identity (as the dispatcher's admin API does), else under the key ring.
func (s *Store) Set(ctx context.Context, orgSlug, providerName string, secret Secret) error {
	var id, orgID string
	err := s.DB.QueryRow(ctx, `SELECT pc.id, o.id FROM provider_configs pc JOIN orgs o ON o.id = pc.org_id
		WHERE o.slug = $1 AND pc.name = $2`, orgSlug, providerName).Scan(&id, &orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: org %q provider %q", ErrNoProvider, orgSlug, providerName)
	}
	if err != nil {
		return fmt.Errorf("finding provider %q of org %q: %w", providerName, orgSlug, err)
	}
	if s.Identities != nil {
		sealer, err := providerstore.NewSealer(s.Identities.Recipient())
		if err != nil {
			return err
		}
		if _, err := providerstore.SetCredential(ctx, s.DB, sealer, orgID, providerName, secret.Reveal(), "provider-router"); err != nil {
			return fmt.Errorf("storing the credential of provider %q: %w", providerName, err)
		}
		s.Invalidate(id)
		return nil
	}
	if s.Ring == nil {
		return ErrNoKeyRing
	}
	keyID, nonce, ct, err := s.Ring.Seal([]byte(secret), []byte(id))
	if err != nil {
		return fmt.Errorf("encrypting: %w", err)
	}
	if _, err := s.DB.Exec(ctx, `INSERT INTO provider_credentials (provider_config_id, scheme, key_id, nonce, ciphertext, last4, set_by)
		VALUES ($1, 'aes-gcm', $2, $3, $4, $5, 'provider-router')
		ON CONFLICT (provider_config_id) DO UPDATE SET scheme = 'aes-gcm', key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
			ciphertext = EXCLUDED.ciphertext, last4 = EXCLUDED.last4, set_by = EXCLUDED.set_by,
			created_at = now(), rotated_at = NULL, revoked_at = NULL`,
		id, keyID, nonce, ct, providerstore.Last4(secret.Reveal())); err != nil {
		return fmt.Errorf("storing the credential of provider %q: %w", providerName, err)
	}
	s.Invalidate(id)
	return nil
}

// Rotate re-seals every credential not under the current key and returns how many it
// changed. With the router's identity that means every key-ring (aes-gcm) row and every age
// row sealed to an older public key: each is opened and sealed again to the current public
// key (filling in its last four characters) — the migration of pre-issue-22 credentials.
// Without an identity, key-ring rows are re-encrypted under the ring's current key. One
// transaction; routers keep serving throughout, since they open every scheme and key they
// hold.
func (s *Store) Rotate(ctx context.Context) (int, error) {
	if s.Identities == nil && s.Ring == nil {
		return 0, ErrNoKeyRing
	}
	var sealer *providerstore.Sealer
	current := ""
	if s.Identities != nil {
		var err error
		if sealer, err = providerstore.NewSealer(s.Identities.Recipient()); err != nil {
			return 0, err
		}
		current = s.Identities.Recipient()
	}
	n := 0
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		q := `SELECT provider_config_id, scheme, key_id, nonce, ciphertext FROM provider_credentials
			WHERE revoked_at IS NULL AND scheme = 'aes-gcm' AND key_id <> $1 FOR UPDATE`
		arg := ""
		if sealer != nil {
			q = `SELECT provider_config_id, scheme, key_id, nonce, ciphertext FROM provider_credentials
				WHERE revoked_at IS NULL AND (scheme = 'aes-gcm' OR key_id <> $1) FOR UPDATE`
			arg = current
		} else {
			arg = s.Ring.Current()
		}
		rows, err := tx.Query(ctx, q, arg)
		if err != nil {
			return err
		}
		type row struct {
			id, scheme, keyID string
			nonce, ct         []byte
		}
		old, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.id, &x.scheme, &x.keyID, &x.nonce, &x.ct)
		})
		if err != nil {
			return err
		}
		for _, r := range old {
			secret, err := s.open(r.id, r.scheme, r.keyID, r.nonce, r.ct)
			if err != nil {
				return fmt.Errorf("provider %s: %w", r.id, err)
			}
			if sealer != nil {
				err = providerstore.ResealCredential(ctx, tx, sealer, r.id, secret.Reveal())
			} else {
				var keyID string
				var nonce, ct []byte
				if keyID, nonce, ct, err = s.Ring.Seal([]byte(secret), []byte(r.id)); err == nil {
					_, err = tx.Exec(ctx, `UPDATE provider_credentials SET key_id = $2, nonce = $3, ciphertext = $4,
						last4 = $5, rotated_at = now() WHERE provider_config_id = $1`, r.id, keyID, nonce, ct,
						providerstore.Last4(secret.Reveal()))
				}
			}
			if err != nil {
				return fmt.Errorf("provider %s: %w", r.id, err)
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
