package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// gated is an upstream whose answers wait for open() and name their call number, so two
// upstream calls can never give the same answer. Setup opens it at cleanup, before the
// upstream server is closed.
type gated struct {
	*fake
	gate chan struct{}
	once sync.Once
}

func newGated() *gated {
	g := &gated{gate: make(chan struct{})}
	g.fake = &fake{script: func(n int, r *http.Request) (int, map[string]string, string) {
		select {
		case <-g.gate:
		case <-r.Context().Done():
		}
		return http.StatusOK, nil, strings.Replace(okAnswer, `"content":"hi"`, fmt.Sprintf(`"content":"answer %d"`, n), 1)
	}}
	return g
}

func (g *gated) open() { g.once.Do(func() { close(g.gate) }) }

// stepHeaders are a call's headers naming one (job, step) pair.
func (b *bundle) stepHeaders(jobID, step string) map[string]string {
	h := b.headers()
	h["X-Job-ID"] = jobID
	h["X-Step-Key"] = step
	return h
}

// jobRows counts the ledger rows of one run.
func (b *bundle) jobRows(jobID string) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM usage_ledger WHERE run_id = $1`, jobID).Scan(&n))
	return n
}

// settled waits until every answered call of the job is in the ledger (each was in the
// stream before its answer left, so an empty stream means all were moved), then checks
// the count: a row that should not exist would be there.
func (b *bundle) settled(jobID string, want int) {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		n, err := ledger.Backlog(context.Background(), b.rdb)
		return err == nil && n == 0 && b.jobRows(jobID) >= want
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(b.t, want, b.jobRows(jobID))
}

func content(out map[string]any) string {
	return out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

// The same (job, step) sent twice is one paid call: one upstream call, one ledger row, and
// the second caller gets the first call's answer.
func TestSameStepTwiceCallsProviderOnce(t *testing.T) {
	t.Parallel()
	g := newGated()
	g.open()
	b := setup(t, options{upstream: g})
	jobID := uuid()
	code, first := b.chat(b.stepHeaders(jobID, "llm/1"), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", first)
	code, second := b.chat(b.stepHeaders(jobID, "llm/1"), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", second)
	require.Equal(t, first, second, "the same answer, billing included")
	require.Equal(t, "answer 1", content(second))
	require.Len(t, g.calls(), 1, "one upstream call")

	// Another step of the same run is another call.
	code, other := b.chat(b.stepHeaders(jobID, "llm/2"), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", other)
	require.Equal(t, "answer 2", content(other))
	b.settled(jobID, 2)
}

// A caller that goes away mid-call does not cancel the upstream call of a step: it runs to
// its end, and a re-request of the pair gets its answer with one upstream call in all.
func TestCallerDisconnectFinishesTheStep(t *testing.T) {
	t.Parallel()
	g := newGated()
	b := setup(t, options{upstream: g})
	jobID := uuid()

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/internal/ai/chat", strings.NewReader(simpleBody))
		if err != nil {
			gone <- err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range b.stepHeaders(jobID, "llm/1") {
			req.Header.Set(k, v)
		}
		resp, err := b.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		gone <- err
	}()
	require.Eventually(t, func() bool { return len(g.calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.Error(t, <-gone, "the caller went away before the answer")
	g.open()

	code, out := b.chat(b.stepHeaders(jobID, "llm/1"), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "answer 1", content(out), "the vanished caller's call, finished")
	require.Len(t, g.calls(), 1, "one upstream call in all")
	b.settled(jobID, 1)
}

// A pair in flight on one replica and re-requested on another: the second waits for the
// first's answer instead of calling the provider.
func TestStepInFlightOnAnotherReplicaIsAwaited(t *testing.T) {
	t.Parallel()
	g := newGated()
	b := setup(t, options{upstream: g})
	second := b.serve(b.newServer(options{}))
	jobID := uuid()

	type result struct {
		code int
		out  map[string]any
	}
	results := make(chan result, 2)
	ask := func(url string) {
		code, out, _ := chatVia(t, b.client, url, b.stepHeaders(jobID, "iter/1/llm"), simpleBody)
		results <- result{code, out}
	}
	go ask(b.url)
	require.Eventually(t, func() bool { return len(g.calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	go ask(second)
	// The second call has reached its replica: it waits (its log says so) — or, without a
	// hand-off, it has called the provider too.
	require.Eventually(t, func() bool {
		return len(g.calls()) > 1 || strings.Contains(b.logs.String(), "waiting for the step's call in flight")
	}, 10*time.Second, 5*time.Millisecond)
	g.open()
	r1, r2 := <-results, <-results
	require.Equal(t, http.StatusOK, r1.code, "%v", r1.out)
	require.Equal(t, http.StatusOK, r2.code, "%v", r2.out)
	require.Equal(t, r1.out, r2.out)
	require.Len(t, g.calls(), 1, "one upstream call across both replicas")
	b.settled(jobID, 1)
}

// When the call in flight fails, its lock is released and the waiting call makes the
// call itself.
func TestWaiterCallsItselfWhenTheFirstCallFails(t *testing.T) {
	t.Parallel()
	g := newGated()
	f := &fake{script: func(n int, r *http.Request) (int, map[string]string, string) {
		if n == 1 {
			<-g.gate
			return http.StatusBadRequest, nil, `{"error":{"message":"no","type":"invalid_request_error"}}`
		}
		return http.StatusOK, nil, okAnswer
	}}
	b := setup(t, options{upstream: f})
	t.Cleanup(g.open)
	jobID := uuid()
	codes := make(chan int, 2)
	go func() { code, _ := b.chat(b.stepHeaders(jobID, "llm/1"), simpleBody); codes <- code }()
	require.Eventually(t, func() bool { return len(f.calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	go func() { code, _ := b.chat(b.stepHeaders(jobID, "llm/1"), simpleBody); codes <- code }()
	require.Eventually(t, func() bool { return strings.Contains(b.logs.String(), "waiting for the step's call in flight") },
		10*time.Second, 5*time.Millisecond)
	g.open()
	got := []int{<-codes, <-codes}
	require.ElementsMatch(t, []int{http.StatusBadGateway, http.StatusOK}, got)
	require.Len(t, f.calls(), 2)
	b.settled(jobID, 1)
}

// A step's call whose caller went away because its run was cancelled is cancelled too:
// no one will take its answer.
func TestCancelledRunCancelsItsStepsCall(t *testing.T) {
	t.Parallel()
	cancelled, end := make(chan struct{}), make(chan struct{})
	f := &fake{script: func(n int, r *http.Request) (int, map[string]string, string) {
		_, _ = io.Copy(io.Discard, r.Body) // the server watches the connection once the body is read
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-end:
		}
		return http.StatusOK, nil, okAnswer
	}}
	b := setup(t, options{upstream: f})
	t.Cleanup(func() { close(end) })
	runID, _ := testkit.NewRun(t, b.pool, "running")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/internal/ai/chat", strings.NewReader(simpleBody))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range b.stepHeaders(runID, "llm/1") {
			req.Header.Set(k, v)
		}
		if resp, err := b.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return len(f.calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	// What the dispatcher's cancel does first; then the executor drops the call.
	_, err := b.pool.Exec(context.Background(), `UPDATE runs SET cancel_requested_at = now() WHERE id = $1`, runID)
	require.NoError(t, err)
	cancel()
	<-done
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider call of a cancelled run went on")
	}
}

// A call's X-Span-ID is recorded with its ledger row; a repeated call of the step under
// another span (a resumed attempt's) is answered from the first and changes nothing. A span
// id that is not a UUID is refused, naming the header, before the provider is called.
func TestSpanIDIsRecordedWithTheCall(t *testing.T) {
	t.Parallel()
	g := newGated()
	g.open()
	b := setup(t, options{upstream: g})
	jobID, first, resumed := uuid(), uuid(), uuid()
	h := b.stepHeaders(jobID, "llm/1")
	h["X-Span-ID"] = first
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	h["X-Span-ID"] = resumed
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	b.settled(jobID, 1)
	var span string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT COALESCE(span_id::text, '') FROM usage_ledger WHERE run_id = $1`, jobID).Scan(&span))
	require.Equal(t, first, span, "the span of the call that was paid")

	h = b.stepHeaders(uuid(), "llm/1")
	h["X-Span-ID"] = "span-1"
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusBadRequest, code, "%v", out)
	require.Equal(t, "VALIDATION_FAILED", errCode(out))
	require.Equal(t, "X-Span-ID", out["context"].(map[string]any)["header"])
	require.Len(t, g.calls(), 1, "the provider was called once in all")
}
