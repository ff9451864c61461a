package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/toolcall"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// routerError is a refusal of the router as it travels on the wire: its status, its
// headers (Retry-After) and the structured body of every Switchyard error. Without an
// Error it is no answer at all: the call hangs until its caller goes away.
type routerError struct{ *apierr.Error }

func (e *routerError) write(w http.ResponseWriter, r *http.Request) {
	if e.Error == nil {
		<-r.Context().Done()
		return
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.Body())
}

// fail answers the step's next calls with errs, in turn, before the step's answer.
func (f *fakeRouter) fail(step string, errs ...*apierr.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range errs {
		f.script[step] = append(f.script[step], &routerError{e})
	}
}

// hang leaves the step's next call unanswered until its caller goes away.
func (f *fakeRouter) hang(step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[step] = append(f.script[step], &routerError{})
}

// header returns a header of the step's last call.
func (f *fakeRouter) header(step, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[step].Get(name)
}

// The router's refusals the tests use, as provider-router answers them.
func providerUnavailable() *apierr.Error {
	return apierr.New(http.StatusBadGateway, apierr.CodeProviderUnavailable, "The provider failed.", "Retry.")
}

func budgetExceeded() *apierr.Error {
	return apierr.New(http.StatusPaymentRequired, apierr.CodeBudgetExceeded, "The run's cost ceiling would be exceeded.",
		"Raise the ceiling.").With("cost_ceiling_usd", 0.01)
}

func rateLimitWait(after time.Duration) *apierr.Error {
	return apierr.New(http.StatusTooManyRequests, apierr.CodeRateLimitWait,
		"The provider's rate limit has no capacity for this call within the caller's wait (X-Capacity-Wait-MS).",
		"Come back after retry_after_ms (Retry-After).").
		With("provider", "sim", "model", "sim-fast", "ahead", 3, "retry_after_ms", after.Milliseconds()).
		SetHeader("Retry-After", strconv.Itoa(int(after.Seconds()+0.999)))
}

// deliveryKey carries, in a test's handler context, the task delivery that asynq would put
// there (how many times the task was retried, and its maximum).
type deliveryKey struct{}

type delivery struct{ retried, maxRetry int }

// withDelivery is the context of the task's delivery after retried retries of maxRetry.
func withDelivery(ctx context.Context, retried, maxRetry int) context.Context {
	return context.WithValue(ctx, deliveryKey{}, delivery{retried, maxRetry})
}

// deliveryOf is the tests' Runner.delivery; without withDelivery it reads as asynq's
// functions do without asynq's context: no retry left.
func deliveryOf(ctx context.Context) (int, int) {
	d, _ := ctx.Value(deliveryKey{}).(delivery)
	return d.retried, d.maxRetry
}

// logSignals is the runner's log in the tests: it drops records, and closes the channel a
// test asked for (logged) when a record with that message is written — the signal a test
// waits on instead of sleeping.
type logSignals struct {
	mu   sync.Mutex
	wait map[string]chan struct{}
}

func newLogSignals() *logSignals { return &logSignals{wait: map[string]chan struct{}{}} }

// logged returns a channel closed once a record with message msg is logged.
func (l *logSignals) logged(msg string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signal(msg)
}

func (l *logSignals) signal(msg string) chan struct{} {
	ch, ok := l.wait[msg]
	if !ok {
		ch = make(chan struct{})
		l.wait[msg] = ch
	}
	return ch
}

func (l *logSignals) Enabled(context.Context, slog.Level) bool { return true }

func (l *logSignals) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.signal(r.Message)
	select {
	case <-ch:
	default:
		close(ch)
	}
	return nil
}

func (l *logSignals) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSignals) WithGroup(string) slog.Handler      { return l }

// countingTool is a tool endpoint that counts its calls and answers {"ok": true}.
type countingTool struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls int
	keys  map[string]int // calls by Idempotency-Key
}

func newCountingTool(t *testing.T) *countingTool {
	t.Helper()
	ct := &countingTool{keys: map[string]int{}}
	ct.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct.mu.Lock()
		ct.calls++
		ct.keys[r.Header.Get(toolcall.HeaderIdempotencyKey)]++
		ct.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(ct.srv.Close)
	return ct
}

func (ct *countingTool) count() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.calls
}

// register registers the tool under name for the bundle's organisation.
func (ct *countingTool) register(t *testing.T, b *bundle, tl tool.Tool) {
	t.Helper()
	tl.Description, tl.URLTemplate, tl.AllowPrivate = "a test tool", ct.srv.URL+"/"+tl.Name, true
	require.NoError(t, tool.Put(context.Background(), b.pool, tl))
	require.NoError(t, tool.Grant(context.Background(), b.pool, tl.Name, b.orgID))
}

// runRow is what the tests read back of a run.
type runRow struct {
	Status        string
	Attempts      int
	LLMCalls      int
	TokensIn      int64
	TokensOut     int64
	CostUSD       float64
	Error         map[string]any
	AttemptErrors []map[string]any
	HoldReasons   []map[string]any
	ParkReason    *string
	ParkedUntil   *time.Time
	WaitingSince  *time.Time
}

func (b *bundle) run(t *testing.T, runID string) runRow {
	t.Helper()
	var r runRow
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status, attempts, llm_calls, tokens_in, tokens_out,
		cost_usd::float8, error, attempt_errors, hold_reasons, park_reason, parked_until, waiting_since
		FROM runs WHERE id = $1`, runID).Scan(&r.Status, &r.Attempts, &r.LLMCalls, &r.TokensIn, &r.TokensOut,
		&r.CostUSD, &r.Error, &r.AttemptErrors, &r.HoldReasons, &r.ParkReason, &r.ParkedUntil, &r.WaitingSince))
	return r
}

// events returns the types of the run's journaled events, in order.
func (b *bundle) events(t *testing.T, runID string) []string {
	t.Helper()
	envs, err := runstore.New(b.pool).Replay(context.Background(), b.orgID, runID, 0)
	require.NoError(t, err)
	types := make([]string, 0, len(envs))
	for _, e := range envs {
		types = append(types, e.Type)
	}
	return types
}

// review decides a paused run as the dispatcher's approve and reject endpoints do: the
// review is recorded and the run moves (approve: back to queued, for its task's next
// delivery; reject: rejected) in one transaction.
func (b *bundle) review(t *testing.T, runID, decision string) {
	t.Helper()
	ctx := context.Background()
	to := run.Queued
	if decision == "reject" {
		to = run.Rejected
	}
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = runstore.New(tx).Transition(ctx, runID, []run.Status{run.HeldForReview, run.PendingReview}, to, runstore.Change{})
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reviews (run_id, org_id, decision, reviewer, reason) VALUES ($1, $2, $3, 'rita', 'ok')`,
		runID, b.orgID, decision)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// callTool is an LLM answer that calls the tool name once with the call id.
func callTool(id, name, args string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: id,
		Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}}}}
}
