package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// binDir holds the binaries built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-e2e-bin")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := func() int {
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "building binaries:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func build(dir string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	for _, pkg := range []string{"dispatcher/cmd/dispatcher", "executor/cmd/executor", "executor/cmd/executor-gpu",
		"provider-router/cmd/provider-router", "provider-router/cmd/sim-llm"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), "./"+pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// Stack is the four binaries running against a test's own Postgres and Redis databases.
type Stack struct {
	t           *testing.T
	Env         []string
	DispatchURL string
	SimURL      string
	AdminKey    string
	Root        string
	logs        map[string]*bytes.Buffer
	mu          sync.Mutex
	procs       map[string]*exec.Cmd
	executorURL string
	// DB is the stack's database URL.
	DB string
	// RouterAddr is the router's host:port; RouterTLSDir holds the dev CA and
	// certificates when StackOptions.RouterTLS is set.
	RouterAddr, RouterTLSDir string
}

// StartExecutor starts the CPU executor and waits until it serves.
func (s *Stack) StartExecutor() {
	s.t.Helper()
	s.start("executor")
	s.waitHealthy(s.executorURL + "/healthz")
}

// StackOptions adjust the stack.
type StackOptions struct {
	// SimArgs are extra sim-llm flags.
	SimArgs []string
	// ExtraEnv is added to every process's environment.
	ExtraEnv []string
	// NoExecutor leaves the executor stopped; start it with StartExecutor.
	NoExecutor bool
	// RouterTLS runs the router with mutual TLS: `provider-router certs` issues a dev CA and
	// certificates into the test's directory, the router serves HTTPS requiring the
	// executor's client certificate, and the executor is given its certificate.
	RouterTLS bool
}

// nextPort hands out ports for the binaries the tests start. They come from a range below
// Linux's ephemeral ports (32768+) and are never handed out twice, so a port picked for one
// stack cannot be taken meanwhile by another parallel stack or by an ephemeral socket — which
// asking the kernel for a free port (":0") and closing it again cannot promise.
var nextPort atomic.Int32

func init() { nextPort.Store(int32(21000 + os.Getpid()%2000)) }

func freePort(t *testing.T) string {
	t.Helper()
	for range 1000 {
		port := nextPort.Add(1)
		if port >= 24000 {
			nextPort.Store(21000)
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if l, err := net.Listen("tcp", addr); err == nil {
			require.NoError(t, l.Close())
			return addr
		}
	}
	t.Fatal("no free port in 21000-23999")
	return ""
}

// startStack migrates, bootstraps and starts sim-llm, provider-router, executor and
// dispatcher as subprocesses, and stops them when the test ends.
func startStack(t *testing.T, opts StackOptions) *Stack {
	t.Helper()
	dbURL, _ := testkit.DB(t)
	redisURL, _ := testkit.Redis(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "service.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("e2e-service-key-"+filepath.Base(dir)), 0o600))
	root, _ := filepath.Abs("..")
	s := &Stack{t: t, Root: root, DB: dbURL, logs: map[string]*bytes.Buffer{}, procs: map[string]*exec.Cmd{}}
	addr := map[string]string{"dispatcher": freePort(t), "router": freePort(t), "executor": freePort(t), "sim": freePort(t)}
	s.DispatchURL = "http://" + addr["dispatcher"]
	s.SimURL = "http://" + addr["sim"]
	s.Env = append([]string{
		"SWITCHYARD_DATABASE_URL=" + dbURL,
		"SWITCHYARD_REDIS_URL=" + redisURL,
		"SWITCHYARD_DISPATCHER_ADDR=" + addr["dispatcher"],
		"SWITCHYARD_ROUTER_ADDR=" + addr["router"],
		"SWITCHYARD_ROUTER_URL=http://" + addr["router"],
		"SWITCHYARD_EXECUTOR_ADDR=" + addr["executor"],
		"SWITCHYARD_SERVICE_KEY_FILE=" + keyFile,
		"SWITCHYARD_LOG_LEVEL=debug",
	}, opts.ExtraEnv...)

	routerHealth := "http://" + addr["router"] + "/healthz"
	if opts.RouterTLS {
		tlsDir := filepath.Join(dir, "tls")
		s.runOnce("provider-router", "certs", "--dir", tlsDir)
		s.Env = append(s.Env,
			"SWITCHYARD_ROUTER_TLS_CERT="+filepath.Join(tlsDir, "router.pem"),
			"SWITCHYARD_ROUTER_TLS_KEY="+filepath.Join(tlsDir, "router-key.pem"),
			"SWITCHYARD_ROUTER_CLIENT_CA="+filepath.Join(tlsDir, "ca.pem"),
			"SWITCHYARD_ROUTER_URL=https://"+addr["router"],
			"SWITCHYARD_ROUTER_CA_FILE="+filepath.Join(tlsDir, "ca.pem"),
			"SWITCHYARD_ROUTER_CERT_FILE="+filepath.Join(tlsDir, "executor.pem"),
			"SWITCHYARD_ROUTER_KEY_FILE="+filepath.Join(tlsDir, "executor-key.pem"))
		s.RouterTLSDir = tlsDir
		routerHealth = "https://" + addr["router"] + "/healthz"
	}
	s.RouterAddr = addr["router"]
	s.runOnce("dispatcher", "migrate")
	s.runOnce("dispatcher", "bootstrap", "--key-file", filepath.Join(dir, "admin.key"),
		"--skills", filepath.Join(root, "skills"), "--tools", filepath.Join(root, "tools"), "--sim-url", s.SimURL+"/v1")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	require.NoError(t, err)
	s.AdminKey = strings.TrimSpace(string(key))

	s.start("sim-llm", append([]string{"--addr", addr["sim"]}, opts.SimArgs...)...)
	s.waitHealthy(s.SimURL + "/healthz")
	s.start("provider-router")
	s.waitHealthy(routerHealth)
	s.executorURL = "http://" + addr["executor"]
	if !opts.NoExecutor {
		s.StartExecutor()
	}
	s.start("dispatcher")
	s.waitHealthy(s.DispatchURL + "/readyz")
	return s
}

func (s *Stack) runOnce(bin string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "%s %v: %s", bin, args, out)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (s *Stack) start(bin string, args ...string) {
	s.t.Helper()
	s.startWith(bin, append(os.Environ(), s.Env...), args...)
}

// startWith starts a binary with exactly the environment env and stops it when the test ends.
func (s *Stack) startWith(bin string, env []string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Env = env
	buf := &bytes.Buffer{}
	cmd.Stdout = lockedWriter{&s.mu, buf}
	cmd.Stderr = lockedWriter{&s.mu, buf}
	require.NoError(s.t, cmd.Start())
	s.mu.Lock()
	s.logs[bin] = buf
	s.procs[bin] = cmd
	s.mu.Unlock()
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if s.t.Failed() {
			s.mu.Lock()
			s.t.Logf("--- %s log ---\n%s", bin, tail(buf.String(), 6000))
			s.mu.Unlock()
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (s *Stack) waitHealthy(url string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	client := http.DefaultClient
	if s.RouterTLSDir != "" && strings.HasPrefix(url, "https://") {
		// The health check proves the router serves TLS with a certificate the dev CA signed.
		ca, err := os.ReadFile(filepath.Join(s.RouterTLSDir, "ca.pem"))
		require.NoError(s.t, err)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	}
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("%s did not become healthy", url)
}

// Do sends a request to the dispatcher with the admin key and decodes the JSON answer.
func (s *Stack) Do(method, path string, body any) (int, map[string]any) {
	s.t.Helper()
	return s.DoKey(s.AdminKey, method, path, body)
}

// DoKey is Do with another API key.
func (s *Stack) DoKey(key, method, path string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.DispatchURL+path, rd)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		require.NoError(s.t, json.Unmarshal(raw, &out), "body: %s", raw)
	}
	return resp.StatusCode, out
}

// WaitStatus polls a job until its status is terminal or matches one of want.
func (s *Stack) WaitStatus(jobID string, timeout time.Duration, want ...string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		code, r := s.Do(http.MethodGet, "/api/v1/dispatch/"+jobID, nil)
		require.Equal(s.t, http.StatusOK, code, "%v", r)
		last = r
		for _, w := range want {
			if r["status"] == w {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("job %s did not reach %v within %s; last: %v", jobID, want, timeout, last)
	return nil
}
