package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/metrics"
	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/executor/internal/toolcall"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/testkit"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// pgProxy is a TCP proxy in front of the test's Postgres that the test can cut: while cut,
// its connections are closed and new ones are closed at once, as in a Postgres outage.
type pgProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

func newPGProxy(t testing.TB, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				c.Close()
				continue
			}
			wg.Go(func() { p.forward(c) })
		}
	})
	return p
}

func (p *pgProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *pgProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// setCut starts (true) or ends (false) the outage.
func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// fakeRouter answers chat calls by step key (X-Step-Key) from answers and records every call.
type fakeRouter struct {
	srv *httptest.Server
	// before, when set, runs before a call is answered.
	before func(step string)

	mu       sync.Mutex
	calls    map[string]int
	requests map[string]openai.ChatCompletionRequest
	headers  map[string]http.Header // the last call's, by step
	jobIDs   map[string]bool
	// script holds, by step, router errors that answer the step's next calls in turn before
	// its answer does (fail).
	script map[string][]*routerError
}

func newFakeRouter(t testing.TB, answers map[string]openai.ChatCompletionMessage) *fakeRouter {
	t.Helper()
	f := &fakeRouter{calls: map[string]int{}, requests: map[string]openai.ChatCompletionRequest{}, jobIDs: map[string]bool{},
		headers: map[string]http.Header{}, script: map[string][]*routerError{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		step := r.Header.Get(aichat.HeaderStepKey)
		var req openai.ChatCompletionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.calls[step]++
		f.requests[step] = req
		f.jobIDs[r.Header.Get(aichat.HeaderJobID)] = true
		f.headers[step] = r.Header.Clone()
		var fail *routerError
		if q := f.script[step]; len(q) > 0 {
			fail, f.script[step] = q[0], q[1:]
		}
		before := f.before
		f.mu.Unlock()
		if before != nil {
			before(step)
		}
		if fail != nil {
			fail.write(w, r)
			return
		}
		msg, ok := answers[step]
		if !ok {
			http.Error(w, `{"error":true,"code":"VALIDATION_FAILED","message":"no answer for step `+step+`"}`, http.StatusBadRequest)
			return
		}
		var a routerclient.Answer
		a.ID, a.Model, a.Provider, a.CostUSD = "chatcmpl-1", "sim-fast", "sim", 0.001
		a.Choices = []openai.ChatCompletionChoice{{Message: msg, FinishReason: openai.FinishReasonStop}}
		a.Usage = openai.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRouter) count(step string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[step]
}

type bundle struct {
	pool    *pgxpool.Pool // direct, for the test's own reads
	proxy   *pgProxy
	runner  *Runner
	router  *fakeRouter
	metrics *metrics.Metrics
	orgID   string
	logs    *logSignals
}

// setup returns a runner whose Postgres goes through a proxy the test can cut, talking to
// a fake router.
func setup(t testing.TB, answers map[string]openai.ChatCompletionMessage) *bundle {
	t.Helper()
	dbURL, pool := testkit.DB(t)
	_, rdb := testkit.Redis(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	viaProxy, err := pgxpool.New(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(viaProxy.Close)
	m, err := metrics.New()
	require.NoError(t, err)
	router := newFakeRouter(t, answers)
	b := &bundle{pool: pool, proxy: proxy, router: router, metrics: m, orgID: testkit.NewOrg(t, pool)}
	b.logs = newLogSignals()
	b.runner = &Runner{DB: viaProxy, Events: &event.Publisher{Redis: rdb}, Metrics: m, Tooling: &toolcall.Invoker{},
		Log: slog.New(b.logs), delivery: deliveryOf,
		Router: &routerclient.Client{BaseURL: router.srv.URL, ServiceKey: "k", Caller: "executor", HTTP: router.srv.Client()},
	}
	return b
}

// newRun registers the skill and queues a run of it.
func (b *bundle) newRun(t testing.TB, sk skill.Skill) string {
	t.Helper()
	ctx := context.Background()
	sk.Enabled = true
	_, _, err := skill.Put(ctx, b.pool, b.orgID, sk, "test")
	require.NoError(t, err)
	id := uuid.NewString()
	_, err = b.pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
		execution_type, queue, status, payload, queued_at)
		VALUES ($1, $2, $3, $4, 1, '{}', $5, 'default', 'queued', '{"prompt":"hello"}', now())`,
		id, b.orgID, uuid.NewString(), sk.JobType, sk.ExecutionType)
	require.NoError(t, err)
	return id
}

// parked returns the park a handler answered with: asynq's worker retries the task after
// its delay without counting a failure.
func parked(err error) (*queue.Parked, bool) {
	p, ok := err.(*queue.Parked)
	return p, ok
}

// handle runs one attempt of the run's task, as asynq would hand it to the handler.
func (b *bundle) handle(ctx context.Context, runID string) error {
	payload, _ := json.Marshal(queue.RunTask{RunID: runID, OrgID: b.orgID})
	return b.runner.HandleRun(ctx, asynq.NewTask(queue.TypeRun, payload))
}

func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (b *bundle) status(t testing.TB, runID string) string {
	t.Helper()
	var st string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status FROM runs WHERE id = $1`, runID).Scan(&st))
	return st
}

func text(s string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: s}
}

// TestPaidAnswerSurvivesAJournalOutage cuts Postgres the moment the router answers and
// gives it back once the journal write of the answer has failed: the answer is held and
// journaled once the database is back, within the same attempt. The provider is asked
// once, the call carried its step key, and the answer is billed once.
func TestPaidAnswerSurvivesAJournalOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi there")})
	runID := b.newRun(t, skill.Skill{JobType: "hello", ExecutionType: "llm_only", MaxTokens: 16})
	failed := b.logs.logged("journal write failed; retrying while the attempt has time")
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		<-failed
		b.proxy.setCut(false)
	}()
	var cut sync.Once
	b.router.before = func(string) { cut.Do(func() { b.proxy.setCut(true) }) }

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, b.handle(ctx, runID))
	<-restored

	require.Equal(t, 1, b.router.count("llm/1"), "the paid answer was not requested again")
	require.Equal(t, "completed", b.status(t, runID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM run_journal WHERE run_id = $1 AND step_key = 'llm/1'`, runID))
	require.Equal(t, "llm/1", b.router.header("llm/1", aichat.HeaderStepKey))
	var spanID string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT id::text FROM spans WHERE run_id = $1 AND type = 'llm_call'`, runID).Scan(&spanID))
	require.Equal(t, spanID, b.router.header("llm/1", aichat.HeaderSpanID), "the call names its llm_call span")
	require.Equal(t, 1, b.count(t, `SELECT llm_calls FROM runs WHERE id = $1`, runID), "billed once")
	require.InDelta(t, 0.001, b.run(t, runID).CostUSD, 1e-9)
	m := scrape(t, b.metrics)
	require.Equal(t, "1", m[`switchyard_executor_journal_writes_total{kind="llm_answer",outcome="after_retry"}`])
	require.Empty(t, m[`switchyard_executor_journal_writes_total{kind="llm_answer",outcome="failed"}`])
}

// TestJournalOutageLongerThanTheAttemptGivesUp: the answer is held only while the attempt
// has time; then the attempt ends (the step key lets the router answer the next one from
// the first answer).
func TestJournalOutageLongerThanTheAttemptGivesUp(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi there")})
	runID := b.newRun(t, skill.Skill{JobType: "hello", ExecutionType: "llm_only", MaxTokens: 16})
	b.router.before = func(string) { b.proxy.setCut(true) }
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = b.handle(ctx, runID) // the run's end cannot be recorded either: Postgres is still down
	require.Less(t, time.Since(start), 15*time.Second, "bounded by the attempt's deadline (and one try's timeout)")
	require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_journal_writes_total{kind="llm_answer",outcome="failed"}`])
}

// ticketTool is a side-effecting tool endpoint. With honour set it answers a repeated
// Idempotency-Key with the first ticket instead of filing another. The first call blocks
// until its request is cancelled: it is in flight when its worker dies.
type ticketTool struct {
	srv    *httptest.Server
	honour bool

	mu       sync.Mutex
	requests int
	tickets  int               // side effects
	byKey    map[string]string // key -> ticket
	received chan struct{}
	release  chan struct{}
}

func newTicketTool(t *testing.T, honour bool) *ticketTool {
	tt := &ticketTool{honour: honour, byKey: map[string]string{}, received: make(chan struct{}, 10),
		release: make(chan struct{})}
	tt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(toolcall.HeaderIdempotencyKey)
		tt.mu.Lock()
		tt.requests++
		first := tt.requests == 1
		ticket, seen := tt.byKey[key]
		if !seen || !tt.honour {
			tt.tickets++
			ticket = fmt.Sprintf("T-%d", tt.tickets)
			tt.byKey[key] = ticket
		}
		tt.mu.Unlock()
		tt.received <- struct{}{}
		if first {
			select {
			case <-r.Context().Done():
			case <-tt.release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ticket_id":%q}`, ticket)
	}))
	t.Cleanup(tt.srv.Close)
	t.Cleanup(func() { close(tt.release) }) // before Close: a failed test leaves no call blocked
	return tt
}

func (tt *ticketTool) counts() (requests, tickets int) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.requests, tt.tickets
}

// TestInFlightSideEffectIsResentToAToolThatHonoursTheKey: the first attempt dies while the
// side-effecting call is in flight (the tool received it). The resumed attempt sends it
// again with the same key when the tool honours the key — one side effect, and the LLM
// reads the tool's real answer — and otherwise tells the LLM the outcome is unknown.
func TestInFlightSideEffectIsResentToAToolThatHonoursTheKey(t *testing.T) {
	t.Parallel()
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprintf("honours=%v", honour), func(t *testing.T) {
			t.Parallel()
			call := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{
				ID: "c1", Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: "file_ticket", Arguments: `{"title":"printer on fire"}`}}}}
			b := setup(t, map[string]openai.ChatCompletionMessage{"iter/1/llm": call, "iter/2/llm": text("filed")})
			tt := newTicketTool(t, honour)
			tl := tool.Tool{Name: "file_ticket", Description: "file a ticket", URLTemplate: tt.srv.URL + "/tickets",
				SideEffecting: true, HonoursIdempotencyKey: honour, AllowPrivate: true}
			require.NoError(t, tool.Put(context.Background(), b.pool, tl))
			require.NoError(t, tool.Grant(context.Background(), b.pool, tl.Name, b.orgID))
			runID := b.newRun(t, skill.Skill{JobType: "ticket", ExecutionType: "tool_using", MaxTokens: 16,
				Tools: []string{"file_ticket"}, MaxIterations: 3})

			// Attempt 1 dies (its context ends: the worker lost its lease) with the call in flight.
			ctx1, kill := context.WithCancel(context.Background())
			go func() { <-tt.received; kill() }()
			require.Error(t, b.handle(ctx1, runID))
			require.Equal(t, "running", b.status(t, runID), "the run resumes on the task's next delivery")

			ctx2, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, b.handle(ctx2, runID))
			require.Equal(t, "completed", b.status(t, runID))
			require.Equal(t, 1, b.router.count("iter/1/llm"), "the journaled answer was replayed")
			requests, tickets := tt.counts()
			require.Equal(t, 1, tickets, "one side effect")

			second := b.router.requests["iter/2/llm"].Messages
			seen := second[len(second)-1]
			require.Equal(t, openai.ChatMessageRoleTool, seen.Role)
			if honour {
				require.Equal(t, 2, requests, "sent again with its key")
				require.JSONEq(t, `{"ticket_id":"T-1"}`, seen.Content, "the LLM reads the tool's real answer")
				require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_tool_calls_total{outcome="resent",tool="file_ticket"}`])
			} else {
				require.Equal(t, 1, requests, "never sent twice")
				require.Contains(t, seen.Content, "outcome of this file_ticket call is unknown")
			}
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM tool_calls WHERE run_id = $1`, runID))
		})
	}
}

// TestMetricsAfterARun: the executor's series carry a run's tier, status, pickups, resumes,
// and its LLM, tool and journal outcomes.
func TestMetricsAfterARun(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi")})
	runID := b.newRun(t, skill.Skill{JobType: "hello", ExecutionType: "llm_only", MaxTokens: 16})
	require.NoError(t, b.handle(context.Background(), runID))
	require.Equal(t, "completed", b.status(t, runID))

	want := map[string]string{
		`switchyard_executor_runs_total{status="completed",tier="llm_only"}`:                 "1",
		`switchyard_executor_run_duration_seconds_count{status="completed",tier="llm_only"}`: "1",
		`switchyard_executor_pickups_total{queue="default",result="claimed"}`:                "1",
		`switchyard_executor_queue_wait_seconds_count{queue="default"}`:                      "1",
		`switchyard_executor_claim_duration_seconds_count`:                                   "1",
		`switchyard_executor_llm_calls_total{outcome="ok"}`:                                  "1",
		`switchyard_executor_llm_call_duration_seconds_count{result="ok"}`:                   "1",
		`switchyard_executor_journal_writes_total{kind="llm_answer",outcome="ok"}`:           "1",
		`switchyard_executor_journal_write_duration_seconds_count{kind="llm_answer"}`:        "1",
	}
	got := scrape(t, b.metrics)
	for series, v := range want {
		require.Equal(t, v, got[series], series)
	}

	// A task of a run that is not runnable any more is a dropped pickup.
	require.NoError(t, b.handle(context.Background(), runID))
	require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_pickups_total{queue="",result="dropped"}`])
}

// scrape serves the metrics as /metrics does and returns each sample's value by series.
func scrape(t testing.TB, m *metrics.Metrics) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]string{}
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		out[line[:i]] = line[i+1:]
	}
	return out
}
