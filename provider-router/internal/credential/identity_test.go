package credential_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func identities(t *testing.T, dir string, rotate bool) (*credential.Identities, string) {
	t.Helper()
	file := filepath.Join(dir, "credentials.agekey")
	_, recipient, err := credential.GenerateIdentityFile(file, filepath.Join(dir, "credentials.pub"), rotate)
	require.NoError(t, err)
	ids, err := credential.LoadIdentities(file)
	require.NoError(t, err)
	return ids, recipient
}

// The dispatcher seals with the public key only (shared/providerstore); the router opens
// with its identity, follows a rotation of the key at once, and refuses a revoked key.
// Pre-issue-22 key-ring credentials keep working and `credentials rotate` moves them to age.
func TestAgeSealedCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	var orgID, pcID, oldID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ('age-org', 'A') RETURNING id`).Scan(&orgID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind) VALUES ($1, 'openai', 'openai') RETURNING id`, orgID).Scan(&pcID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind) VALUES ($1, 'legacy', 'openai') RETURNING id`, orgID).Scan(&oldID))

	dir := t.TempDir()
	ids, recipient := identities(t, dir, false)
	pub, err := os.ReadFile(filepath.Join(dir, "credentials.pub"))
	require.NoError(t, err)
	require.Equal(t, recipient, strings.TrimSpace(string(pub)))
	again, recipient2 := identities(t, dir, false)
	require.Equal(t, recipient, recipient2, "an existing identity is kept")
	require.Equal(t, ids.Recipient(), again.Recipient())

	sealer, err := providerstore.NewSealer(recipient)
	require.NoError(t, err)
	_, err = providerstore.SetCredential(ctx, pool, sealer, orgID, "openai", "sk-age-first-1111", "key:admin")
	require.NoError(t, err)

	router := &credential.Store{DB: pool, Identities: ids}
	s, v1, found, err := router.Get(ctx, pcID)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "sk-age-first-1111", s.Reveal())
	_, _, _, err = (&credential.Store{DB: pool}).Get(ctx, pcID)
	require.ErrorIs(t, err, credential.ErrNoIdentity, "without the identity nothing opens")

	// Rotation of the key: the registry watcher invalidates, the next Get has the new key.
	_, err = providerstore.SetCredential(ctx, pool, sealer, orgID, "openai", "sk-age-second-2222", "key:admin")
	require.NoError(t, err)
	router.Invalidate(pcID)
	s, v2, _, err := router.Get(ctx, pcID)
	require.NoError(t, err)
	require.Equal(t, "sk-age-second-2222", s.Reveal())
	require.True(t, v2.After(v1) || !v2.Equal(v1), "the version changes, so adapters are rebuilt")

	require.NoError(t, providerstore.RevokeCredential(ctx, pool, orgID, "openai"))
	router.Invalidate(pcID)
	_, _, _, err = router.Get(ctx, pcID)
	var revoked *credential.RevokedError
	require.ErrorAs(t, err, &revoked)

	// A key-ring credential of before: opened by the ring, migrated by Rotate.
	k1 := newKey()
	ringStore := &credential.Store{DB: pool, Ring: ring(t, "k1", map[string]string{"k1": k1})}
	require.NoError(t, ringStore.Set(ctx, "age-org", "legacy", "sk-legacy-3333"))
	both := &credential.Store{DB: pool, Ring: ring(t, "k1", map[string]string{"k1": k1}), Identities: ids}
	s, _, _, err = both.Get(ctx, oldID)
	require.NoError(t, err)
	require.Equal(t, "sk-legacy-3333", s.Reveal())
	n, err := both.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the key-ring row is re-sealed; the revoked one is left alone")
	var scheme, last4 string
	require.NoError(t, pool.QueryRow(ctx, `SELECT scheme, last4 FROM provider_credentials WHERE provider_config_id = $1`, oldID).Scan(&scheme, &last4))
	require.Equal(t, "age", scheme)
	require.Equal(t, "3333", last4)
	s, _, _, err = router.Get(ctx, oldID)
	require.NoError(t, err, "the migrated credential opens without the ring")
	require.Equal(t, "sk-legacy-3333", s.Reveal())

	// A new identity: the old one still opens until rotate re-seals to the new one.
	newIDs, newRecipient := identities(t, dir, true)
	require.NotEqual(t, recipient, newRecipient)
	router2 := &credential.Store{DB: pool, Identities: newIDs}
	_, _, _, err = router2.Get(ctx, oldID)
	require.NoError(t, err)
	n, err = router2.Rotate(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var keyID string
	require.NoError(t, pool.QueryRow(ctx, `SELECT key_id FROM provider_credentials WHERE provider_config_id = $1`, oldID).Scan(&keyID))
	require.Equal(t, newRecipient, keyID)
}
