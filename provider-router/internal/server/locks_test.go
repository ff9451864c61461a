package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
)

// Each lock is tested on its own: the other two are satisfied, so only the lock under test
// can refuse, and the answer names it and nothing more.
func TestLocks(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})

	t.Run("all three pass", func(t *testing.T) {
		code, out := b.chat(b.headers(), simpleBody)
		require.Equal(t, http.StatusOK, code, "%v", out)
		require.Equal(t, "upstream", out["provider"])
	})

	refused := func(t *testing.T, code int, out map[string]any, lock string) {
		t.Helper()
		require.Equal(t, http.StatusForbidden, code, "%v", out)
		require.Equal(t, "FORBIDDEN", errCode(out))
		require.Equal(t, map[string]any{"lock": lock}, out["context"])
	}

	t.Run("mtls: no client certificate", func(t *testing.T) {
		code, out, _ := chatVia(t, b.clientWith("", ""), b.url, b.headers(), simpleBody)
		refused(t, code, out, "mtls")
	})
	t.Run("mtls: identity not on the allowlist", func(t *testing.T) {
		certPEM, keyPEM, err := mtls.IssueClient(devCA(t), "dispatcher", "spiffe://switchyard.local/dispatcher")
		require.NoError(t, err)
		code, out, _ := chatVia(t, clientWithPEM(t, certPEM, keyPEM), b.url, b.headers(), simpleBody)
		refused(t, code, out, "mtls")
	})
	t.Run("mtls: certificate from another CA", func(t *testing.T) {
		other := t.TempDir()
		_, err := mtls.EnsureDevCA(other)
		require.NoError(t, err)
		certPEM, err := os.ReadFile(filepath.Join(other, mtls.ExecutorFile))
		require.NoError(t, err)
		keyPEM, err := os.ReadFile(filepath.Join(other, mtls.ExecutorKeyFile))
		require.NoError(t, err)
		code, out, _ := chatVia(t, clientWithPEM(t, certPEM, keyPEM), b.url, b.headers(), simpleBody)
		refused(t, code, out, "mtls")
	})
	t.Run("service key wrong", func(t *testing.T) {
		h := b.headers()
		h["X-Service-Key"] = b.serviceKey + "x"
		code, out := b.chat(h, simpleBody)
		refused(t, code, out, "service_key")
	})
	t.Run("service key missing", func(t *testing.T) {
		h := b.headers()
		delete(h, "X-Service-Key")
		code, out := b.chat(h, simpleBody)
		refused(t, code, out, "service_key")
	})
	t.Run("caller not allowlisted", func(t *testing.T) {
		h := b.headers()
		h["X-Caller-Service"] = "dispatcher"
		code, out := b.chat(h, simpleBody)
		refused(t, code, out, "caller_service")
	})
	t.Run("an allowlisted URI SAN identity passes", func(t *testing.T) {
		certPEM, keyPEM, err := mtls.IssueClient(devCA(t), "not-on-the-list", "spiffe://switchyard.local/executor")
		require.NoError(t, err)
		// Only the CN is allowlisted in setup, so this must fail; then allow the URI.
		code, out, _ := chatVia(t, clientWithPEM(t, certPEM, keyPEM), b.url, b.headers(), simpleBody)
		refused(t, code, out, "mtls")
		roots, err := mtls.LoadPool(filepath.Join(devCA(t), mtls.CAFile))
		require.NoError(t, err)
		v := mtls.NewVerifier(roots, []string{mtls.ExecutorURI})
		srv := b.newServer(options{})
		srv.MTLS = v
		url := b.serve(srv)
		code, out, _ = chatVia(t, clientWithPEM(t, certPEM, keyPEM), url, b.headers(), simpleBody)
		require.Equal(t, http.StatusOK, code, "%v", out)
	})
	require.EqualValues(t, 2, b.served(), "only the calls that passed every lock reached the provider")
}

func TestDevCAIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := mtls.EnsureDevCA(dir)
	require.NoError(t, err)
	require.Len(t, first.Created, 6)
	ca, err := os.ReadFile(filepath.Join(dir, mtls.CAFile))
	require.NoError(t, err)
	again, err := mtls.EnsureDevCA(dir)
	require.NoError(t, err)
	require.Empty(t, again.Created)
	ca2, err := os.ReadFile(filepath.Join(dir, mtls.CAFile))
	require.NoError(t, err)
	require.Equal(t, ca, ca2)
	// A lost leaf is re-issued from the same CA.
	require.NoError(t, os.Remove(filepath.Join(dir, mtls.ExecutorFile)))
	third, err := mtls.EnsureDevCA(dir)
	require.NoError(t, err)
	require.Equal(t, []string{mtls.ExecutorFile, mtls.ExecutorKeyFile}, third.Created)
	info, err := os.Stat(filepath.Join(dir, mtls.CAKeyFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}
