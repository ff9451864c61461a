package mtls_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
)

// TestDevCALayout: with a layout, the CA's private key stays in the CA's directory; the
// router's and the executor's directories hold only their own certificate and key and a
// copy of the CA certificate, every file 0600 and every directory 0700.
func TestDevCALayout(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	l := mtls.Layout{CA: filepath.Join(base, "ca"), Router: filepath.Join(base, "router"), Executor: filepath.Join(base, "executor")}
	res, err := mtls.EnsureDevCAAt(l)
	require.NoError(t, err)
	require.Len(t, res.Created, 8)
	want := map[string][]string{
		l.CA:       {mtls.CAFile, mtls.CAKeyFile},
		l.Router:   {mtls.CAFile, mtls.RouterFile, mtls.RouterKeyFile},
		l.Executor: {mtls.CAFile, mtls.ExecutorFile, mtls.ExecutorKeyFile},
	}
	for dir, files := range want {
		info, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), dir)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			info, err := e.Info()
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
		}
		require.ElementsMatch(t, files, names, dir)
	}
	again, err := mtls.EnsureDevCAAt(l)
	require.NoError(t, err)
	require.Empty(t, again.Created)

	// The executor's certificate from its own directory passes the router's verifier built
	// from the router's copy of the CA.
	roots, err := mtls.LoadPool(filepath.Join(l.Router, mtls.CAFile))
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(filepath.Join(l.Executor, mtls.ExecutorFile), filepath.Join(l.Executor, mtls.ExecutorKeyFile))
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	id, err := mtls.NewVerifier(roots, []string{"executor"}).Identify(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
	require.NoError(t, err)
	require.Equal(t, "executor", id)
}
