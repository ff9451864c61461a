package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
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
		if err := harness.Build(context.Background(), dir); err != nil {
			fmt.Fprintln(os.Stderr, "building binaries:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// Stack is the binaries running against a test's own Postgres and Redis databases
// (harness.Test), with the helpers the tests use to talk to them.
type Stack struct {
	t *testing.T
	// H is the harness: addresses, keys, and the control of each process.
	H           *harness.Harness
	DispatchURL string
	SimURL      string
	AdminKey    string
	Root        string
	// DB is the stack's database URL.
	DB string
	// RouterAddr is the router's host:port; RouterTLSDir holds the dev CA and
	// certificates (the router serves them when StackOptions.RouterTLS is set).
	RouterAddr, RouterTLSDir string
}

// StartExecutor starts the CPU executor and waits until it serves.
func (s *Stack) StartExecutor() {
	s.t.Helper()
	s.start("executor")
}

// StackOptions adjust the stack.
type StackOptions struct {
	// SimArgs are extra sim-llm flags.
	SimArgs []string
	// ToolArgs are extra demo-tool flags (setupExec starts the demo tool).
	ToolArgs []string
	// ExtraEnv is added to every process's environment.
	ExtraEnv []string
	// NoExecutor leaves the executor stopped; start it with StartExecutor.
	NoExecutor bool
	// RouterTLS runs the router with mutual TLS: the router serves HTTPS requiring the
	// executor's client certificate, and the executor is given its certificate.
	RouterTLS bool
}

// freePort returns a loopback address that no other stack of this process is handed.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	require.NoError(t, err)
	return addr
}

// startStack migrates, bootstraps and starts sim-llm, provider-router, executor and
// dispatcher as subprocesses, each with its own environment and secrets, and stops them
// when the test ends.
func startStack(t *testing.T, opts StackOptions) *Stack {
	t.Helper()
	h := harness.Test(t, harness.Options{Bin: binDir, RouterTLS: opts.RouterTLS, Bootstrap: true,
		SimArgs: opts.SimArgs, ToolArgs: opts.ToolArgs, Env: opts.ExtraEnv, LogLevel: "debug"})
	s := &Stack{t: t, H: h, DispatchURL: h.DispatcherURL, SimURL: h.SimURL, AdminKey: h.AdminKey, Root: h.Root(),
		DB: h.DBURL, RouterAddr: h.Addr(harness.Router), RouterTLSDir: h.TLSDir}
	s.start(harness.Sim)
	s.start(harness.Router)
	if !opts.NoExecutor {
		s.StartExecutor()
	}
	s.start(harness.Dispatcher)
	return s
}

func (s *Stack) runOnce(bin string, args ...string) {
	s.t.Helper()
	require.NoError(s.t, s.H.Run(context.Background(), bin, args...))
}

// start starts a service (again, on its address) and waits until it is ready.
func (s *Stack) start(bin string) {
	s.t.Helper()
	_, err := s.H.Start(context.Background(), bin)
	require.NoError(s.t, err)
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
