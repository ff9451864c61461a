package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"filippo.io/age"

	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// runSpec is how scripts/run.sh starts a service: its whole environment, its binary and
// arguments (`scripts/run.sh command NAME`).
type runSpec struct {
	env  map[string]string
	argv []string
}

var envLine = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// secretName matches the variable names that carry secrets by convention: any word KEY,
// KEYS, CERT, CA, SECRET, TOKEN or PASSWORD.
var secretName = regexp.MustCompile(`(^|_)(KEYS?|CERT|CA|SECRETS?|TOKEN|PASSWORD)(_|$)`)

// files returns the values of the spec (environment and arguments) that name files run.sh
// made (in runDir).
func (s runSpec) files(runDir string) []string {
	var out []string
	vals := append([]string{}, s.argv[1:]...)
	for _, v := range s.env {
		vals = append(vals, v)
	}
	for _, v := range vals {
		if info, err := os.Stat(v); err == nil && info.Mode().IsRegular() && strings.HasPrefix(v, runDir+"/") &&
			!strings.HasPrefix(v, filepath.Join(runDir, "bin")+"/") {
			out = append(out, v)
		}
	}
	return out
}

// dispatcherCannotOpenCredentials proves that what run.sh gives the dispatcher seals a
// provider key the router opens but the dispatcher itself cannot: it holds the router's
// public key and no identity — no value of its environment, and no file any of them names,
// is an age identity, and none of them opens the sealed key.
func dispatcherCannotOpenCredentials(t *testing.T, disp, router runSpec, runDir string) {
	t.Helper()
	recipient := disp.env["SWITCHYARD_CREDENTIAL_RECIPIENT"]
	require.NotEmpty(t, recipient, "the dispatcher is given the router's public key")
	sealer, err := providerstore.NewSealer(recipient)
	require.NoError(t, err)
	const key = "sk-live-dispatcher-never-reads-this"
	sealed, err := sealer.Seal("00000000-0000-0000-0000-00000000000a", key)
	require.NoError(t, err)
	require.NotContains(t, string(sealed), key)

	idFile := router.env["SWITCHYARD_ROUTER_IDENTITY_FILE"]
	require.NotEmpty(t, idFile, "the router is given its identity")
	data, err := os.ReadFile(idFile)
	require.NoError(t, err)
	routerIDs, err := age.ParseIdentities(bytes.NewReader(data))
	require.NoError(t, err)
	opened, err := providerstore.Open(routerIDs, "00000000-0000-0000-0000-00000000000a", sealed)
	require.NoError(t, err, "the router opens what the dispatcher sealed")
	require.Equal(t, key, opened)

	var candidates [][]byte
	for k, v := range disp.env {
		require.NotContains(t, v, "AGE-SECRET-KEY", "the dispatcher's %s holds an identity", k)
		require.NotEqual(t, idFile, v, "the dispatcher is given the router's identity file")
		candidates = append(candidates, []byte(v))
		if b, err := os.ReadFile(v); err == nil {
			candidates = append(candidates, b)
		}
	}
	for _, arg := range disp.argv {
		if b, err := os.ReadFile(arg); err == nil && !strings.HasPrefix(arg, filepath.Join(runDir, "bin")) {
			candidates = append(candidates, b)
		}
	}
	for _, c := range candidates {
		ids, err := age.ParseIdentities(bytes.NewReader(c))
		if err != nil {
			continue
		}
		_, err = providerstore.Open(ids, "00000000-0000-0000-0000-00000000000a", sealed)
		require.Error(t, err, "something the dispatcher holds opens a sealed credential")
	}
}

// TestRunGivesEachProcessOnlyItsSecrets drives the code `make run` starts the processes
// with (scripts/run.sh: `secrets` prepares the files, `command NAME` prints exactly what a
// service is started with) in a directory of its own, from a shell that has exported
// secrets by habit. Each process must be given only its own secrets: the dispatcher, sim-llm
// and the demo tool none; the router and the executor only files of their own directory,
// 0600 in a 0700 directory; the CA's private key to none. Then the router is started as
// run.sh starts it, and a caller holding everything run.sh gives the dispatcher is refused,
// while one holding what it gives the executor passes all three locks.
func TestRunGivesEachProcessOnlyItsSecrets(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	runDir := t.TempDir()
	require.NoError(t, os.Symlink(binDir, filepath.Join(runDir, "bin")))
	shellEnv := append(os.Environ(), "SWITCHYARD_RUN_DIR="+runDir,
		// Secrets a developer's shell might have exported: none may reach any process.
		"SWITCHYARD_SERVICE_KEY_FILE=/leaked/service.key", "SWITCHYARD_ROUTER_KEYS={\"leaked\":true}",
		"SWITCHYARD_ROUTER_TLS_KEY=/leaked/router-key.pem", "SWITCHYARD_API_KEY=sy_leaked",
		// A setting that is not a secret still reaches the services.
		"SWITCHYARD_TASK_CHECK_INTERVAL=7ms")
	sh := func(args ...string) string {
		cmd := exec.Command(filepath.Join(root, "scripts", "run.sh"), args...)
		cmd.Env = shellEnv
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "scripts/run.sh %v: %s", args, errOut.String())
		return out.String()
	}
	sh("secrets")
	specs := map[string]runSpec{}
	for _, name := range []string{"sim-llm", "demo-tool", "provider-router", "executor", "executor-gpu", "dispatcher"} {
		lines := strings.Split(strings.TrimRight(sh("command", name), "\n"), "\n")
		require.Equal(t, []string{"env", "-i"}, lines[:2], "%s starts from an empty environment", name)
		s := runSpec{env: map[string]string{}}
		for _, l := range lines[2:] {
			if s.argv == nil && envLine.MatchString(l) {
				k, v, _ := strings.Cut(l, "=")
				s.env[k] = v
				continue
			}
			s.argv = append(s.argv, l)
		}
		require.Equal(t, filepath.Join(runDir, "bin", name), s.argv[0])
		specs[name] = s
	}

	secretsDir := filepath.Join(runDir, "secrets")
	own := map[string]string{"provider-router": "provider-router", "executor": "executor", "executor-gpu": "executor"}
	secretVars := map[string]bool{}
	for name, s := range specs {
		for k, v := range s.env {
			require.NotContains(t, v, "leaked", "%s: %s comes from the caller's shell", name, k)
		}
		dir, holds := own[name]
		for _, f := range s.files(runDir) {
			require.True(t, holds, "%s is given the file %s", name, f)
			require.Equal(t, filepath.Join(secretsDir, dir), filepath.Dir(f), "%s is given %s, outside its own directory", name, f)
		}
		if holds {
			for k, v := range s.env {
				if strings.HasPrefix(v, secretsDir) {
					secretVars[k] = true
				}
			}
		}
	}
	require.Len(t, specs["provider-router"].files(runDir), 6, "service key, TLS certificate and key, client CA, key ring, credential identity")
	dispatcherCannotOpenCredentials(t, specs["dispatcher"], specs["provider-router"], runDir)
	require.Len(t, specs["executor"].files(runDir), 4, "service key, client certificate and key, CA")
	require.Equal(t, "7ms", specs["executor"].env["SWITCHYARD_TASK_CHECK_INTERVAL"])
	for _, name := range []string{"dispatcher", "sim-llm", "demo-tool"} {
		for k, v := range specs[name].env {
			require.False(t, secretVars[k], "%s names %s, a secret of the router or the executor", name, k)
			require.False(t, secretName.MatchString(k), "%s is given %s", name, k)
			require.NotContains(t, v, secretsDir, "%s: %s", name, k)
		}
	}
	for _, name := range []string{"sim-llm", "demo-tool"} {
		require.NotContains(t, specs[name].env, "SWITCHYARD_DATABASE_URL", "%s needs no database", name)
	}

	// Every secret file is 0600 in a 0700 directory; the CA's private key is in no
	// service's directory.
	var caKeys []string
	require.NoError(t, filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // bin, the binaries
		}
		if d.Name() == "ca-key.pem" {
			caKeys = append(caKeys, p)
		}
		info, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(runDir, p)
		if strings.HasPrefix(rel, "secrets") || strings.HasPrefix(rel, "ca") {
			want := os.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			require.Equal(t, want, info.Mode().Perm(), rel)
		}
		return nil
	}))
	require.Equal(t, []string{filepath.Join(runDir, "ca", "ca-key.pem")}, caKeys)
	for _, s := range specs {
		for _, v := range s.env {
			require.NotContains(t, v, filepath.Join(runDir, "ca"))
		}
	}

	// The router, started as run.sh starts it, on the test's own stores and port.
	dbURL, _ := testkit.DB(t)
	redisURL, _ := testkit.Redis(t)
	addr := freePort(t)
	rs := specs["provider-router"]
	rs.env["SWITCHYARD_DATABASE_URL"], rs.env["SWITCHYARD_REDIS_URL"], rs.env["SWITCHYARD_ROUTER_ADDR"] = dbURL, redisURL, addr
	var env []string
	for k, v := range rs.env {
		env = append(env, k+"="+v)
	}
	router, err := harness.Launch("provider-router", rs.argv[0], addr, env, rs.argv[1:], filepath.Join(t.TempDir(), "router.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = router.Stop(15 * time.Second) })
	ex := specs["executor"].env
	caPEM, err := os.ReadFile(ex["SWITCHYARD_ROUTER_CA_FILE"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	health := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	require.NoError(t, harness.WaitReady(context.Background(), health, "https://"+addr+"/healthz", router, time.Minute))

	call := func(cfg *tls.Config, serviceKey, caller string) (int, map[string]any) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/internal/ai/chat",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Service-Key", serviceKey)
		req.Header.Set("X-Caller-Service", caller)
		req.Header.Set("X-Org-ID", "00000000-0000-0000-0000-000000000000")
		req.Header.Set("X-Job-ID", "00000000-0000-0000-0000-000000000000")
		resp, err := client.Do(req)
		if err != nil {
			return 0, map[string]any{"error": err.Error()} // the handshake itself refused
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}

	// The executor's files pass all three locks (the answer is about the call, not a lock).
	pair, err := tls.LoadX509KeyPair(ex["SWITCHYARD_ROUTER_CERT_FILE"], ex["SWITCHYARD_ROUTER_KEY_FILE"])
	require.NoError(t, err)
	key, err := os.ReadFile(ex["SWITCHYARD_SERVICE_KEY_FILE"])
	require.NoError(t, err)
	code, body := call(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}, strings.TrimSpace(string(key)), "executor")
	require.NotEqual(t, http.StatusForbidden, code, "the executor's credentials pass the locks: %v", body)
	require.NotZero(t, code, "%v", body)

	// The dispatcher: every file run.sh names to it tried as a client certificate and key
	// and as the service key, every value of its environment as the service key, as either
	// caller; it is even let off checking the router's certificate, which it cannot.
	d := specs["dispatcher"]
	var certs []tls.Certificate
	keys := []string{""}
	for _, f := range d.files(runDir) {
		b, _ := os.ReadFile(f)
		keys = append(keys, strings.TrimSpace(string(b)))
		for _, g := range d.files(runDir) {
			if c, err := tls.LoadX509KeyPair(f, g); err == nil {
				certs = append(certs, c)
			}
		}
	}
	for _, v := range d.env {
		keys = append(keys, v)
	}
	tries := 0
	for _, cert := range append([]*tls.Certificate{nil}, ptrs(certs)...) {
		cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the dispatcher holds no CA to verify with
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		for _, k := range keys {
			for _, caller := range []string{"dispatcher", "executor"} {
				code, body := call(cfg, k, caller)
				require.Equal(t, http.StatusForbidden, code, "the dispatcher's credentials passed the router's locks: %v", body)
				require.Equal(t, "FORBIDDEN", body["code"])
				tries++
			}
		}
	}
	t.Logf("the dispatcher's credentials were refused %d times; it was given %d files", tries, len(d.files(runDir)))
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}
