package credential_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func ring(t *testing.T, current string, keys map[string]string) *credential.KeyRing {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"current":%q,"keys":{`, current)
	first := true
	for id, k := range keys {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%q", id, k)
	}
	b.WriteString("}}")
	r, err := credential.ParseKeyRing(b.Bytes())
	require.NoError(t, err)
	return r
}

func newKey() string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

func TestSealOpenBindsTheRow(t *testing.T) {
	t.Parallel()
	r := ring(t, "a", map[string]string{"a": newKey()})
	id, nonce, ct, err := r.Seal([]byte("sk-1"), []byte("provider-1"))
	require.NoError(t, err)
	require.Equal(t, "a", id)
	pt, err := r.Open(id, nonce, ct, []byte("provider-1"))
	require.NoError(t, err)
	require.Equal(t, "sk-1", string(pt))
	_, err = r.Open(id, nonce, ct, []byte("provider-2"))
	require.Error(t, err, "a ciphertext copied onto another provider does not open")
	_, err = r.Open("b", nonce, ct, []byte("provider-1"))
	require.ErrorIs(t, err, credential.ErrUnknownKey)
}

func TestParseKeyRingRejectsBadRings(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`{}`, `{"current":"x","keys":{"a":"` + newKey() + `"}}`,
		`{"current":"a","keys":{"a":"c2hvcnQ="}}`, `not json`} {
		_, err := credential.ParseKeyRing([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := credential.Secret("sk-very-secret")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", s)
	require.NotContains(t, buf.String()+fmt.Sprint(s)+fmt.Sprintf("%v %+v %#v %s", s, s, s, s), "sk-very-secret")
	require.Equal(t, "sk-very-secret", s.Reveal())
}

// Rotation without downtime: a router holding both keys opens old and new ciphertexts;
// rotate re-encrypts everything under the current key; then the old key can go.
func TestRotate(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	var orgID, pcID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ('rot-org', 'R') RETURNING id`).Scan(&orgID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind) VALUES ($1, 'openai', 'openai') RETURNING id`, orgID).Scan(&pcID))

	k1, k2 := newKey(), newKey()
	old := &credential.Store{DB: pool, Ring: ring(t, "k1", map[string]string{"k1": k1})}
	require.NoError(t, old.Set(ctx, "rot-org", "openai", "sk-rotate-me"))
	require.ErrorIs(t, old.Set(ctx, "rot-org", "nope", "x"), credential.ErrNoProvider)

	both := &credential.Store{DB: pool, Ring: ring(t, "k2", map[string]string{"k1": k1, "k2": k2})}
	s, _, found, err := both.Get(ctx, pcID)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "sk-rotate-me", s.Reveal(), "the new ring still opens the old ciphertext")

	n, err := both.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var keyID string
	require.NoError(t, pool.QueryRow(ctx, `SELECT key_id FROM provider_credentials WHERE provider_config_id = $1`, pcID).Scan(&keyID))
	require.Equal(t, "k2", keyID)
	n, err = both.Rotate(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "rotation is idempotent")

	onlyNew := &credential.Store{DB: pool, Ring: ring(t, "k2", map[string]string{"k2": k2})}
	s, _, _, err = onlyNew.Get(ctx, pcID)
	require.NoError(t, err)
	require.Equal(t, "sk-rotate-me", s.Reveal())
	onlyOld := &credential.Store{DB: pool, Ring: ring(t, "k1", map[string]string{"k1": k1})}
	_, _, _, err = onlyOld.Get(ctx, pcID)
	require.ErrorIs(t, err, credential.ErrUnknownKey)
}

func TestGenerateKeyFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "keys.json")
	created, err := credential.GenerateKeyFile(p, "k1", false)
	require.NoError(t, err)
	require.True(t, created)
	created, err = credential.GenerateKeyFile(p, "k2", false)
	require.NoError(t, err)
	require.False(t, created, "an existing ring is kept")
	created, err = credential.GenerateKeyFile(p, "k2", true)
	require.NoError(t, err)
	require.True(t, created)
	r, err := credential.LoadKeyRing(p, "")
	require.NoError(t, err)
	require.Equal(t, "k2", r.Current())
	require.Equal(t, []string{"k1", "k2"}, r.IDs())
}
