package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	b.requireCountersMatchLedger(t)
}

// TestRouterSIGKILLBetweenAnswerAndLedgerRecordsTheCall kills the router at the one
// point nothing can save the call: the provider has answered (and billed) it, and the
// answer is on its way to the router, which dies before it has read it. The retry of the
// step cannot be handed that answer — nobody received it — so the provider is called a
// second time: paid twice, which the platform cannot prevent without provider-side
// idempotency. What it must not do is lose the first call: the retry that takes the
// step over records it in the usage ledger with outcome "unknown", beside the
// second call's answered row.
func TestRouterSIGKILLBetweenAnswerAndLedgerRecordsTheCall(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true,
		// A dead router's claim on the step is free after 1 s, not 30 s.
		ExtraEnv: []string{"SWITCHYARD_ROUTER_STEP_CLAIM_TTL=1s", "SWITCHYARD_ROUTER_LEDGER_CLAIM_IDLE=1s"}}})
	ctx := context.Background()

	// Between the router and sim-llm: a call whose prompt says so is answered by sim-llm,
	// and the router is SIGKILLed before a byte of that answer reaches it.
	sim := b.SimURL
	var passed, cut atomic.Int32
	killed := make(chan error, 1)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, sim+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte("cut me off")) && cut.Add(1) == 1 {
			killed <- b.H.Signal("provider-router", syscall.SIGKILL, time.Minute)
			return
		}
		passed.Add(1)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(proxy.Close)
	_, err := b.pool.Exec(ctx, `UPDATE provider_configs SET base_url = $1 WHERE org_id = $2 AND name = 'sim-llm'`,
		proxy.URL+"/v1", b.orgID)
	require.NoError(t, err)

	call := func(jobID, prompt, spanID string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+b.RouterAddr+"/internal/ai/chat",
			strings.NewReader(`{"max_tokens":20,"messages":[{"role":"user","content":"`+prompt+`"}]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Service-Key", b.H.ServiceKey)
		req.Header.Set("X-Caller-Service", "executor")
		req.Header.Set("X-Org-ID", b.orgID)
		req.Header.Set("X-Job-ID", jobID)
		req.Header.Set("X-Step-Key", "llm/1")
		req.Header.Set("X-Span-ID", spanID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The router follows the registry change (pg_notify): wait until calls go through the proxy.
	waitFor(t, 15*time.Second, "calls through the proxy", func() bool {
		code, err := call(uuid.NewString(), "Warm up.", uuid.NewString())
		return err == nil && code == http.StatusOK && passed.Load() > 0
	})
	before := b.simStats(t)

	// Each call under its own span, as two attempts of the run would make them.
	jobID, cutSpan, retrySpan := uuid.NewString(), uuid.NewString(), uuid.NewString()
	_, err = call(jobID, "cut me off", cutSpan)
	require.Error(t, err, "the router died before answering")
	require.NoError(t, <-killed)
	b.start("provider-router")

	// The executor's retry: the same job and step, until the dead router's claim is free.
	waitFor(t, 30*time.Second, "the retry's answer", func() bool {
		code, err := call(jobID, "cut me off", retrySpan)
		return err == nil && code == http.StatusOK
	})
	st := b.simStats(t)
	require.Equal(t, 2, st.Served-before.Served, "the provider answered the cut-off call and the retry: paid twice")

	rows := func() map[string]string {
		out := map[string]string{}
		rs, err := b.pool.Query(ctx, `SELECT outcome, COALESCE(span_id::text, '') FROM usage_ledger
			WHERE run_id = $1 AND step_key = 'llm/1'`, jobID)
		require.NoError(t, err)
		defer rs.Close()
		for rs.Next() {
			var o, sp string
			require.NoError(t, rs.Scan(&o, &sp))
			out[o] += sp
		}
		require.NoError(t, rs.Err())
		return out
	}
	waitFor(t, 15*time.Second, "both calls in the ledger", func() bool { return b.ledgerRows(t, jobID) >= 2 })
	require.Equal(t, map[string]string{"answered": retrySpan, "unknown": cutSpan}, rows(),
		"the retry's call answered, the cut-off call recorded with its outcome unknown, each with its own span")
	b.requireCountersMatchLedger(t)
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
	// The row names the span of the call that was paid, the killed attempt's, not the span
	// of the resumed attempt's call, which the router answered from the first.
	var spans []string
	var paid string
	ctx := context.Background()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(id::text ORDER BY started_at) FROM spans
		WHERE run_id = $1 AND type = 'llm_call'`, jobID).Scan(&spans))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT COALESCE(span_id::text, '') FROM usage_ledger WHERE run_id = $1`,
		jobID).Scan(&paid))
	require.Len(t, spans, 2, "one llm_call span per attempt")
	require.Equal(t, spans[0], paid)
}

// ledgerRows counts the usage-ledger rows of a run.
func (b *execBundle) ledgerRows(t *testing.T, runID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM usage_ledger WHERE run_id = $1`, runID).Scan(&n))
	return n
}

// requireCountersMatchLedger checks the organisation's monthly counters (org_monthly_usage,
// what the dispatcher's quota and cost budget checks read) against its ledger rows, month by
// month: the same tokens and the same cost to the last digit — nothing added twice by a
// re-delivered entry, nothing lost with a killed router — and some cost to compare.
func (b *execBundle) requireCountersMatchLedger(t *testing.T) {
	t.Helper()
	type month struct {
		Month  string
		Tokens int64
		Cost   string
	}
	read := func(sql string) []month {
		rs, err := b.pool.Query(context.Background(), sql, b.orgID)
		require.NoError(t, err)
		ms, err := pgx.CollectRows(rs, pgx.RowToStructByPos[month])
		require.NoError(t, err)
		return ms
	}
	ledger := read(`SELECT date_trunc('month', created_at AT TIME ZONE 'UTC')::date::text, sum(tokens_in + tokens_out)::bigint,
		sum(cost_usd)::numeric(20, 8)::text FROM usage_ledger WHERE org_id = $1 GROUP BY 1 ORDER BY 1`)
	counters := read(`SELECT month::text, tokens, cost_usd::text FROM org_monthly_usage
		WHERE org_id = $1 AND (tokens > 0 OR cost_usd > 0) ORDER BY 1`)
	require.Equal(t, ledger, counters, "the monthly counters are the sums of the ledger rows")
	require.NotEmpty(t, ledger)
	for _, m := range ledger {
		require.NotEqual(t, "0.00000000", m.Cost, "the calls cost something: %+v", m)
	}
}
