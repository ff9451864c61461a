package providerstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
)

// SchemeAge marks a credential sealed with age (X25519) to the router's public key.
const SchemeAge = "age"

// SchemeAESGCM marks a credential sealed by the router's own AES-256-GCM key ring (before
// issue 22); only the router writes those.
const SchemeAESGCM = "aes-gcm"

// envelope is the plaintext inside an age ciphertext: the key bound to its provider config,
// so a ciphertext copied onto another provider's row does not open as that provider's key
// (age has no additional data).
type envelope struct {
	ProviderConfigID string `json:"provider_config_id"`
	Key              string `json:"key"`
}

// Sealer seals credentials to the router's public key (an age X25519 recipient,
// "age1..."). It can seal but not open: the dispatcher holds a Sealer, the router the
// identity.
type Sealer struct {
	recipient *age.X25519Recipient
}

// NewSealer parses the router's public key.
func NewSealer(recipient string) (*Sealer, error) {
	r, err := age.ParseX25519Recipient(strings.TrimSpace(recipient))
	if err != nil {
		return nil, fmt.Errorf("the router's credential public key is not an age X25519 recipient (age1...): %w", err)
	}
	return &Sealer{recipient: r}, nil
}

// Recipient is the public key credentials are sealed to; it is stored as the row's key_id.
func (s *Sealer) Recipient() string { return s.recipient.String() }

// Seal encrypts a provider's API key for the router.
func (s *Sealer) Seal(providerConfigID, key string) ([]byte, error) {
	pt, err := json.Marshal(envelope{ProviderConfigID: providerConfigID, Key: key})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, s.recipient)
	if err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	if _, err := w.Write(pt); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	clear(pt)
	return out.Bytes(), nil
}

// ErrNotForThisProvider is returned by Open for a ciphertext sealed for another provider
// config (a row copied or tampered with).
var ErrNotForThisProvider = errors.New("credential: the sealed key belongs to another provider")

// Open decrypts a credential sealed by Seal with one of the identities (the router's).
// The error never contains the key.
func Open(identities []age.Identity, providerConfigID string, sealed []byte) (string, error) {
	if len(identities) == 0 {
		return "", errors.New("credential: no identity to open sealed credentials with")
	}
	r, err := age.Decrypt(bytes.NewReader(sealed), identities...)
	if err != nil {
		return "", fmt.Errorf("credential: the sealed key does not open with the router's identity: %w", err)
	}
	pt, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("credential: the sealed key does not authenticate: %w", err)
	}
	var e envelope
	err = json.Unmarshal(pt, &e)
	clear(pt)
	if err != nil {
		return "", errors.New("credential: the sealed key is not a credential envelope")
	}
	if e.ProviderConfigID != providerConfigID {
		return "", ErrNotForThisProvider
	}
	return e.Key, nil
}

// Last4 is what may be shown of a key: its last four characters (fewer for a shorter key).
func Last4(key string) string {
	r := []rune(key)
	if len(r) > 4 {
		r = r[len(r)-4:]
	}
	return string(r)
}
