// Package credential keeps provider API keys encrypted at rest and opens them only inside
// the router: AES-256-GCM under a key ring (key id -> 32-byte key, one current), each
// ciphertext bound to its provider config, decrypted secrets cached briefly in memory and
// never logged. Rotation re-encrypts under the current key while every known key still
// decrypts, so it needs no downtime.
package credential

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
)

// Secret is a decrypted provider key. It prints and logs as "[redacted]", so a secret
// that strays into a log line or an error is not disclosed.
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer (%#v).
func (Secret) GoString() string { return "[redacted]" }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Reveal returns the secret itself, for the adapter's auth header only.
func (s Secret) Reveal() string { return string(s) }

// KeyRing holds the data-encryption keys: every key decrypts, the current one encrypts.
type KeyRing struct {
	current string
	aeads   map[string]cipher.AEAD
}

// ringFile is the key ring's JSON form, in SWITCHYARD_ROUTER_KEYS_FILE or
// SWITCHYARD_ROUTER_KEYS: {"current": "k2", "keys": {"k1": "<base64>", "k2": "<base64>"}}.
type ringFile struct {
	Current string            `json:"current"`
	Keys    map[string]string `json:"keys"`
}

// ParseKeyRing reads the JSON form. Every key must be 32 bytes (standard base64) and the
// current id must name one of them.
func ParseKeyRing(data []byte) (*KeyRing, error) {
	var f ringFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("key ring is not JSON {\"current\":..., \"keys\":{...}}: %w", err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New("key ring has no keys")
	}
	r := &KeyRing{current: f.Current, aeads: map[string]cipher.AEAD{}}
	for id, enc := range f.Keys {
		if id == "" || strings.ContainsAny(id, " \t\n") {
			return nil, fmt.Errorf("key ring: key id %q is empty or has spaces", id)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("key ring: key %q is not 32 bytes of standard base64", id)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		if r.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	if _, ok := r.aeads[f.Current]; !ok {
		return nil, fmt.Errorf("key ring: current key %q is not among the keys", f.Current)
	}
	return r, nil
}

// LoadKeyRing reads the ring from file when set, else from env's value. Both empty: nil
// and no error (the router then serves only providers without credentials).
func LoadKeyRing(file, env string) (*KeyRing, error) {
	switch {
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("SWITCHYARD_ROUTER_KEYS_FILE: %w", err)
		}
		r, err := ParseKeyRing(data)
		if err != nil {
			return nil, fmt.Errorf("SWITCHYARD_ROUTER_KEYS_FILE %s: %w", file, err)
		}
		return r, nil
	case env != "":
		r, err := ParseKeyRing([]byte(env))
		if err != nil {
			return nil, fmt.Errorf("SWITCHYARD_ROUTER_KEYS: %w", err)
		}
		return r, nil
	}
	return nil, nil
}

// Current is the id of the key new ciphertexts use.
func (r *KeyRing) Current() string { return r.current }

// IDs lists the known key ids, sorted.
func (r *KeyRing) IDs() []string {
	ids := make([]string, 0, len(r.aeads))
	for id := range r.aeads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Seal encrypts plaintext under the current key; aad binds the ciphertext to its row (the
// provider config id), so a ciphertext copied onto another provider does not open.
func (r *KeyRing) Seal(plaintext, aad []byte) (keyID string, nonce, ciphertext []byte, err error) {
	aead := r.aeads[r.current]
	nonce = make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, nil, err
	}
	return r.current, nonce, aead.Seal(nil, nonce, plaintext, aad), nil
}

// ErrUnknownKey is returned for a ciphertext under a key id the ring does not hold.
var ErrUnknownKey = errors.New("credential: ciphertext key id not in the key ring")

// Open decrypts a ciphertext sealed under any key of the ring.
func (r *KeyRing) Open(keyID string, nonce, ciphertext, aad []byte) ([]byte, error) {
	aead, ok := r.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, keyID)
	}
	if len(nonce) != aead.NonceSize() {
		return nil, errors.New("credential: bad nonce length")
	}
	pt, err := aead.Open(nil, nonce, ciphertext, aad)
	if err != nil {
		return nil, errors.New("credential: ciphertext does not authenticate (wrong key or tampered row)")
	}
	return pt, nil
}

// GenerateKeyFile writes a key ring file holding one fresh key as current, or, when the
// file exists, adds a fresh key and makes it current (the first step of a rotation: then
// restart or roll the routers and run `credentials rotate`). It refuses to rotate when
// rotate is false and the file exists, so a repeated `make run` keeps its key.
func GenerateKeyFile(path, id string, rotate bool) (created bool, err error) {
	f := ringFile{Keys: map[string]string{}}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if !rotate {
			if _, perr := ParseKeyRing(data); perr != nil {
				return false, fmt.Errorf("%s: %w", path, perr)
			}
			return false, nil
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	if _, dup := f.Keys[id]; dup {
		return false, fmt.Errorf("key id %q already exists in %s", id, path)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	f.Keys[id] = base64.StdEncoding.EncodeToString(key)
	f.Current = id
	out, _ := json.MarshalIndent(f, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}
