package credential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"
)

// Identities are the router's age X25519 identities: the private keys that open
// credentials the dispatcher sealed to the router's public key. The first is current (its
// public key is the one to give the dispatcher); the others open credentials sealed to a
// previous key until `credentials rotate` re-seals them.
type Identities struct {
	ids []*age.X25519Identity
}

// ParseIdentities reads an identity file: one AGE-SECRET-KEY-1... per line, # comments.
func ParseIdentities(data []byte) (*Identities, error) {
	ids, err := age.ParseIdentities(strings.NewReader(string(data)))
	if err != nil {
		return nil, errors.New("not an age identity file (lines of AGE-SECRET-KEY-1...)")
	}
	out := &Identities{}
	for _, id := range ids {
		x, ok := id.(*age.X25519Identity)
		if !ok {
			return nil, errors.New("only X25519 identities (AGE-SECRET-KEY-1...) are supported")
		}
		out.ids = append(out.ids, x)
	}
	return out, nil
}

// LoadIdentities reads SWITCHYARD_ROUTER_IDENTITY_FILE; an empty path is nil and no error
// (the router then opens only key-ring credentials).
func LoadIdentities(file string) (*Identities, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_ROUTER_IDENTITY_FILE: %w", err)
	}
	ids, err := ParseIdentities(data)
	clear(data)
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_ROUTER_IDENTITY_FILE %s: %w", file, err)
	}
	return ids, nil
}

// Recipient is the current public key ("age1..."): what the dispatcher seals to.
func (i *Identities) Recipient() string { return i.ids[0].Recipient().String() }

// Known reports whether a recipient is the public key of one of the identities.
func (i *Identities) Known(recipient string) bool {
	for _, id := range i.ids {
		if id.Recipient().String() == recipient {
			return true
		}
	}
	return false
}

func (i *Identities) list() []age.Identity {
	out := make([]age.Identity, len(i.ids))
	for n, id := range i.ids {
		out[n] = id
	}
	return out
}

// GenerateIdentityFile creates the router's identity file (0600) and writes its public key
// to publicFile (0644), or, with rotate, puts a fresh identity first in an existing file
// (older ones stay, so credentials sealed to them still open). Without rotate an existing
// file is kept, and its public key written again: a repeated `make run` keeps its key.
func GenerateIdentityFile(path, publicFile string, rotate bool) (created bool, recipient string, err error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		ids, perr := ParseIdentities(old)
		if perr != nil {
			return false, "", fmt.Errorf("%s: %w", path, perr)
		}
		if !rotate {
			return false, ids.Recipient(), writePublic(publicFile, ids.Recipient())
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, "", err
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return false, "", err
	}
	body := "# provider-router credential identity: keep it secret, give only the public key to the dispatcher\n" +
		"# public key: " + id.Recipient().String() + "\n" + id.String() + "\n" + string(old)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return false, "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, "", err
	}
	return true, id.Recipient().String(), writePublic(publicFile, id.Recipient().String())
}

func writePublic(file, recipient string) error {
	if file == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(recipient+"\n"), 0o644)
}
