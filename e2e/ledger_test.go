package e2e

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestRouterSIGKILLAfterAnswerKeepsLedgerEntries SIGKILLs the router right after it
// answered a run of calls: every answered call's usage-ledger entry survives (it was in
// Redis before the answer left), and the next router moves it into Postgres.
func TestRouterSIGKILLAfterAnswerKeepsLedgerEntries(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true,
		// Entries a dead router had read but not yet written are claimed after 1 s.
		ExtraEnv: []string{"SWITCHYARD_ROUTER_LEDGER_CLAIM_IDLE=1s"}}})
	key := []byte(b.H.ServiceKey)
	jobID := uuid.NewString()
	const calls = 10
	for i := range calls {
		req, err := http.NewRequest(http.MethodPost, "http://"+b.RouterAddr+"/internal/ai/chat",
			strings.NewReader(`{"max_tokens":20,"messages":[{"role":"user","content":"Count the ledger rows."}]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Service-Key", strings.TrimSpace(string(key)))
		req.Header.Set("X-Caller-Service", "executor")
		req.Header.Set("X-Org-ID", b.orgID)
		req.Header.Set("X-Job-ID", jobID)
		req.Header.Set("X-Step-Key", "llm/"+string(rune('a'+i)))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	b.kill(t, "provider-router", syscall.SIGKILL)

	rows := func() int { return b.ledgerRows(t, jobID) }
	b.start("provider-router")
	waitFor(t, 30*time.Second, "every answered call's ledger row", func() bool { return rows() >= calls })
	require.Equal(t, calls, rows(), "one row per call")
}

// TestLLMCallInFlightAtExecutorSIGKILLIsPaidOnce kills the executor while its LLM call is
// in flight: the router finishes the call although its caller is gone and hands the
// answer to the resumed attempt, so the provider is called once and billed once.
func TestLLMCallInFlightAtExecutorSIGKILLIsPaidOnce(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=constant:3s"}}})
	jobID := b.dispatch(t, "demo_llm", map[string]any{"prompt": "Hello"})
	waitFor(t, 30*time.Second, "the LLM call in flight", func() bool { return b.simStats(t).InFlight == 1 })
	b.kill(t, "executor", syscall.SIGKILL)
	b.StartExecutor()
	r := b.WaitStatus(jobID, 90*time.Second, "completed", "failed", "timed_out")
	require.Equal(t, "completed", r["status"], "%v", r)
	st := b.simStats(t)
	require.Equal(t, 1, st.Requests, "one provider call: %+v", st)
	require.Zero(t, st.Cancelled, "the call was not cut off with its caller")
	rows := func() int { return b.ledgerRows(t, jobID) }
	waitFor(t, 10*time.Second, "the call's ledger row", func() bool { return rows() >= 1 })
	require.Equal(t, 1, rows())
}

// ledgerRows counts the usage-ledger rows of a run.
func (b *execBundle) ledgerRows(t *testing.T, runID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM usage_ledger WHERE run_id = $1`, runID).Scan(&n))
	return n
}
