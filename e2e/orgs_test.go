package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
)

// doAt sends a request to the dispatcher at base with key and decodes the JSON answer.
func doAt(t *testing.T, base, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	}
	return resp.StatusCode, out
}

// TestSuspendStopsAnOrganisationOnEveryReplica runs two dispatcher processes, an executor
// and a 20 s LLM: an operator suspends the organisation through one replica; the other
// refuses its next dispatch with ORG_SUSPENDED, the run whose LLM call is in flight ends
// cancelled (the call cut off, not served), the held one is cancelled; resumed, it
// dispatches again.
func TestSuspendStopsAnOrganisationOnEveryReplica(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=constant:20s"}}})
	dir := t.TempDir()
	opFile := filepath.Join(dir, "operator.key")
	b.runOnce(harness.Dispatcher, "bootstrap", "--key-file", filepath.Join(dir, "admin.key"),
		"--operator-key-file", opFile, "--skills", "", "--sim-url", "")
	raw, err := os.ReadFile(opFile)
	require.NoError(t, err)
	op := strings.TrimSpace(string(raw))

	addr2, err := harness.FreeAddr()
	require.NoError(t, err)
	_, err = b.H.StartWith(context.Background(), harness.Dispatcher, harness.Spec{Addr: addr2})
	require.NoError(t, err)
	replica1, replica2 := b.DispatchURL, "http://"+addr2

	running := b.dispatch(t, "demo_llm", map[string]any{"prompt": "Hello"})
	waitFor(t, 30*time.Second, "the LLM call in flight", func() bool { return b.simStats(t).InFlight == 1 })
	code, res := doAt(t, replica2, b.AdminKey, http.MethodPost, "/api/v1/dispatch",
		map[string]any{"job_type": "demo_critical", "payload": map[string]any{"prompt": "hi"}})
	require.Equal(t, http.StatusAccepted, code, "%v", res) // replica 2 has the organisation cached now
	held := res["jobId"].(string)

	code, res = doAt(t, replica1, op, http.MethodPost, "/api/v1/operator/orgs/dev/suspend", map[string]any{"reason": "e2e"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.EqualValues(t, 1, res["cancelRequested"], "%v", res)
	require.EqualValues(t, 1, res["cancelled"], "%v", res)
	suspended := time.Now()

	// Replica 2 heard of it by notification; allow it the notification's delivery, no more.
	var refusedAfter time.Duration
	for {
		code, res = doAt(t, replica2, b.AdminKey, http.MethodPost, "/api/v1/dispatch",
			map[string]any{"job_type": "demo_llm", "payload": map[string]any{"prompt": "hi"}})
		if code == http.StatusForbidden {
			refusedAfter = time.Since(suspended)
			break
		}
		require.Equal(t, http.StatusAccepted, code, "%v", res)
		require.Less(t, time.Since(suspended), time.Second, "replica 2 still dispatches a second after the suspension")
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, "ORG_SUSPENDED", res["code"], "%v", res)
	t.Logf("replica 2 refused %v after the suspension answered", refusedAfter)

	r := b.WaitStatus(running, 15*time.Second, "cancelled", "completed", "failed")
	require.Equal(t, "cancelled", r["status"], "%v", r)
	waitFor(t, 10*time.Second, "sim-llm to see the call cancelled", func() bool { return b.simStats(t).Cancelled == 1 })
	require.Zero(t, b.simStats(t).Served)
	r = b.WaitStatus(held, 5*time.Second, "cancelled")
	require.Equal(t, "cancelled", r["status"], "%v", r)

	code, res = doAt(t, replica2, op, http.MethodPost, "/api/v1/operator/orgs/dev/resume", nil)
	require.Equal(t, http.StatusOK, code, "%v", res)
	waitFor(t, time.Second, "replica 1 to accept dispatches again", func() bool {
		code, _ := doAt(t, replica1, b.AdminKey, http.MethodPost, "/api/v1/dispatch",
			map[string]any{"job_type": "demo_critical", "payload": map[string]any{"prompt": "hi"}})
		return code == http.StatusAccepted
	})
}
