package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// execBundle is a stack plus what the executor tests need around it: the database, the
// dev organisation, the demo tool endpoint and an asynq client.
type execBundle struct {
	*Stack
	pool    *pgxpool.Pool
	orgID   string
	toolURL string
	asynq   asynq.RedisConnOpt
}

type execOptions struct {
	StackOptions
	// ToolArgs are extra demo-tool flags.
	ToolArgs []string
}

// setupExec starts a stack and the demo tool endpoint, whose tools the bootstrap installed.
func setupExec(t *testing.T, o execOptions) *execBundle {
	t.Helper()
	o.StackOptions.ToolArgs = o.ToolArgs
	s := startStack(t, o.StackOptions)
	pool, err := pgxpool.New(context.Background(), s.DB)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &execBundle{Stack: s, pool: pool, toolURL: s.H.ToolURL}
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id FROM orgs WHERE slug = 'dev'`).Scan(&b.orgID))
	s.start(harness.Tool)
	b.asynq, err = redisconn.Asynq(s.H.RedisURL)
	require.NoError(t, err)
	return b
}

// putSkill registers a skill for the dev organisation.
func (b *execBundle) putSkill(t *testing.T, s skill.Skill) {
	t.Helper()
	s.Enabled = true
	_, _, err := skill.Put(context.Background(), b.pool, b.orgID, s, "e2e")
	require.NoError(t, err)
}

func (b *execBundle) putTool(t *testing.T, tl tool.Tool) {
	t.Helper()
	tl.Grants = []string{"dev"}
	require.NoError(t, tool.Install(context.Background(), b.pool, tl))
}

func (b *execBundle) dispatch(t *testing.T, jobType string, payload any) string {
	t.Helper()
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": jobType, "payload": payload})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	return res["jobId"].(string)
}

type toolStats struct {
	Weather    int            `json:"weather"`
	Tickets    int            `json:"tickets"`
	Duplicates int            `json:"duplicates"`
	Keys       map[string]int `json:"keys"`
}

func (b *execBundle) toolStats(t *testing.T) toolStats {
	t.Helper()
	resp, err := http.Get(b.toolURL + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st toolStats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

type simTotals struct {
	Requests  int `json:"requests"`
	Served    int `json:"served"`
	Cancelled int `json:"cancelled"`
	InFlight  int `json:"in_flight"`
}

func (b *execBundle) simStats(t *testing.T) simTotals {
	t.Helper()
	resp, err := http.Get(b.SimURL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		Total simTotals `json:"total"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st.Total
}

// events returns the run's journaled events in order.
func (b *execBundle) events(t *testing.T, runID string) []map[string]any {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT seq, type, data FROM run_events WHERE run_id = $1 ORDER BY seq`, runID)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var seq int64
		var typ string
		var data []byte
		require.NoError(t, rows.Scan(&seq, &typ, &data))
		var d any
		require.NoError(t, json.Unmarshal(data, &d))
		out = append(out, map[string]any{"seq": seq, "type": typ, "data": d})
	}
	require.NoError(t, rows.Err())
	return out
}

func eventTypes(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

func (b *execBundle) journaled(t *testing.T, runID, like string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM run_journal WHERE run_id = $1 AND step_key LIKE $2`, runID, like).Scan(&n))
	return n
}

// kill sends sig to a service's latest process and waits for it to exit.
func (b *execBundle) kill(t *testing.T, bin string, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, b.H.Signal(bin, sig, time.Minute))
}

// startWith starts a service with extra environment (later entries win) and waits until
// it is ready.
func (b *execBundle) startWith(t *testing.T, bin string, env []string) {
	t.Helper()
	_, err := b.H.StartWith(context.Background(), bin, harness.Spec{Env: env})
	require.NoError(t, err)
}

func (b *execBundle) cancel(t *testing.T, runID string) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `UPDATE runs SET cancel_requested_at = now() WHERE id = $1`, runID)
	require.NoError(t, err)
	insp := asynq.NewInspector(b.asynq)
	defer insp.Close()
	require.NoError(t, insp.CancelProcessing(runID))
}

// review does what the dispatcher's approve/reject endpoints do for a pending_review run
// in the contract the executor relies on: a reviews row, pending_review -> queued, and the
// run's task enqueued again (the finished task of the paused attempt is deleted first, as
// its id is the run id).
func (b *execBundle) review(t *testing.T, runID, decision string) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO reviews (run_id, org_id, decision, reviewer, reason)
		VALUES ($1, $2, $3, 'e2e-reviewer', 'checked')`, runID, b.orgID, decision)
	require.NoError(t, err)
	_, err = runstore.New(b.pool).Transition(ctx, runID, []run.Status{run.PendingReview}, run.Queued, runstore.Change{})
	require.NoError(t, err)
	tier := queue.Tier("default", run.PriorityNormal)
	insp := asynq.NewInspector(b.asynq)
	defer insp.Close()
	_ = insp.DeleteTask(tier, runID)
	c := queue.NewClient(b.asynq)
	defer c.Close()
	task, err := queue.NewRunTask(queue.Enqueue{RunID: runID, OrgID: b.orgID, Queue: "default",
		Priority: run.PriorityNormal, Timeout: time.Minute, MaxRetry: 3})
	require.NoError(t, err)
	_, err = c.EnqueueContext(ctx, task)
	require.NoError(t, err)
}

func (b *execBundle) spans(t *testing.T, jobID string) []map[string]any {
	t.Helper()
	code, res := b.Do(http.MethodGet, "/api/v1/dispatch/"+jobID+"/spans", nil)
	require.Equal(t, http.StatusOK, code)
	var out []map[string]any
	for _, s := range res["spans"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func reactSkill(jobType string, tools []string, maxIter int) skill.Skill {
	return skill.Skill{JobType: jobType, ExecutionType: "tool_using", RoutingHint: "fast", Tools: tools,
		MaxIterations: maxIter, MaxTokens: 64, SystemPrompt: "Use the tools."}
}

// TestReactEndToEnd runs the catalogue's demo_react skill through the real binaries: the
// first LLM call forces a tool call, the tool answers, the second call answers in text.
func TestReactEndToEnd(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	jobID := b.dispatch(t, "demo_react", map[string]any{"prompt": "Paris weather and open a ticket"})
	r := b.WaitStatus(jobID, 30*time.Second, "completed", "failed", "completed_max_iterations", "timed_out")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.Contains(t, out["content"], "Based on the results of")
	require.Equal(t, 2.0, out["iterations"])
	require.Equal(t, 2.0, r["billing"].(map[string]any)["llmCalls"])

	st := b.toolStats(t)
	require.Equal(t, 1, st.Weather+st.Tickets, "exactly one tool call reached the tool: %+v", st)
	require.Zero(t, st.Duplicates)

	// Spans: two iterations, each with its llm_call; the first with the tool_call.
	spans := b.spans(t, jobID)
	byID := map[string]map[string]any{}
	count := map[string]int{}
	for _, s := range spans {
		byID[s["id"].(string)] = s
		count[s["type"].(string)]++
	}
	require.Equal(t, 2, count["react_iteration"], "%v", count)
	require.Equal(t, 2, count["llm_call"])
	require.Equal(t, 1, count["tool_call"])
	for _, s := range spans {
		switch s["type"] {
		case "llm_call", "tool_call":
			parent := byID[s["parentId"].(string)]
			require.Equal(t, "react_iteration", parent["type"], "%v", s)
			require.Equal(t, "ok", s["status"])
		}
	}

	evs := b.events(t, jobID)
	types := eventTypes(evs)
	for _, want := range []string{"job:started", "job:skill_resolved", "job:llm_call", "job:llm_response",
		"job:tool_call", "job:tool_result", "job:span", "job:progress", "job:completed"} {
		require.Contains(t, types, want)
	}
	for i, e := range evs {
		require.Equal(t, int64(i+1), e["seq"], "seq is contiguous")
	}
	require.Equal(t, "job:completed", types[len(types)-1])
	var last map[string]any
	for _, e := range evs {
		if e["type"] == "job:llm_response" {
			last = e["data"].(map[string]any)
		}
	}
	require.Equal(t, 2.0, last["cumulative"].(map[string]any)["llm_calls"])
}

// TestReactMaxIterations ends a loop that never answers without tools at max_iterations.
func TestReactMaxIterations(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putSkill(t, reactSkill("react_one", []string{"demo_weather", "not_granted_or_missing"}, 1))
	jobID := b.dispatch(t, "react_one", map[string]any{"prompt": "Weather in Rome"})
	r := b.WaitStatus(jobID, 30*time.Second, "completed", "failed", "completed_max_iterations")
	require.Equal(t, "completed_max_iterations", r["status"], "%v", r)
	require.Contains(t, fmt.Sprint(r["warnings"]), "MAX_ITERATIONS")
	require.Equal(t, 1, b.toolStats(t).Weather)

	// A skill whose tools the organisation may not use fails clearly.
	_, err := b.pool.Exec(context.Background(), `DELETE FROM tool_grants WHERE tool_name = 'demo_weather'`)
	require.NoError(t, err)
	jobID = b.dispatch(t, "react_one", map[string]any{"prompt": "Weather in Rome"})
	r = b.WaitStatus(jobID, 30*time.Second, "completed", "failed", "completed_max_iterations")
	require.Equal(t, "failed", r["status"])
	require.Equal(t, "NO_TOOLS_AVAILABLE", r["error"].(map[string]any)["code"])
}

// TestSideEffectExactlyOnceAcrossSIGKILL kills the executor with SIGKILL after the
// side-effecting tool answered (its result journaled) while the next LLM call is in
// flight. The run resumes on a new executor from the journal: the journaled LLM call is not
// repeated and the ticket endpoint receives exactly one call.
func TestSideEffectExactlyOnceAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{
		SimArgs: []string{"--model", "sim-fast=latency=constant:1500ms,output=uniform:10-30"}}})
	b.putSkill(t, reactSkill("file_ticket", []string{"create_ticket"}, 5))
	jobID := b.dispatch(t, "file_ticket", map[string]any{"prompt": "Printer on fire"})

	waitFor(t, 30*time.Second, "the ticket result journaled", func() bool {
		return b.journaled(t, jobID, "iter/1/tool/%") == 1
	})
	require.Equal(t, 1, b.toolStats(t).Tickets)
	b.kill(t, "executor", syscall.SIGKILL)
	require.Equal(t, 0, b.journaled(t, jobID, "iter/2/llm"), "killed before the next step finished")

	b.StartExecutor()
	r := b.WaitStatus(jobID, 60*time.Second, "completed", "failed", "completed_max_iterations")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, 2.0, r["attempts"])
	st := b.toolStats(t)
	require.Equal(t, 1, st.Tickets, "the side effect happened once: %+v", st)
	require.Zero(t, st.Duplicates)
	require.Len(t, st.Keys, 1)
	// The LLM answered iter/1 once (journaled, replayed) and iter/2 once after the resume.
	require.Equal(t, 2, b.simStats(t).Served)
	var ledger int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM tool_calls WHERE run_id = $1 AND status = 'succeeded'`, jobID).Scan(&ledger))
	require.Equal(t, 1, ledger)
}

// TestSideEffectInFlightAtSIGKILLIsResentWithItsKey kills the executor while the tool is
// still working on the call (it received it; its answer is not back). The ledger row says
// the call started, and create_ticket declares that it honours Idempotency-Key: the resumed
// run sends the call again with the same key, the tool answers with the ticket it filed
// the first time, and the LLM reads that answer. One ticket is filed. (A tool that does not
// honour the key is never sent it again: runner's TestInFlightSideEffectIsResentToAToolThatHonoursTheKey.)
func TestSideEffectInFlightAtSIGKILLIsResentWithItsKey(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{ToolArgs: []string{"--delay", "3s"}})
	b.putSkill(t, reactSkill("file_ticket", []string{"create_ticket"}, 5))
	jobID := b.dispatch(t, "file_ticket", map[string]any{"prompt": "Printer on fire"})
	waitFor(t, 30*time.Second, "the ticket call to reach the tool", func() bool { return b.toolStats(t).Tickets == 1 })
	b.kill(t, "executor", syscall.SIGKILL)
	b.StartExecutor()
	r := b.WaitStatus(jobID, 60*time.Second, "completed", "failed", "completed_max_iterations")
	require.Equal(t, "completed", r["status"], "%v", r)
	st := b.toolStats(t)
	require.Equal(t, 2, st.Tickets, "sent twice: %+v", st)
	require.Equal(t, 1, st.Duplicates, "the second time with the first call's key, answered with its ticket")
	require.Len(t, st.Keys, 1)
	var content string
	var resent bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT data->'result'->>'content', COALESCE((data->>'resent')::bool, false)
		FROM run_journal WHERE run_id = $1 AND step_key LIKE 'iter/1/tool/%'`, jobID).Scan(&content, &resent))
	require.True(t, resent)
	require.Contains(t, content, `"ticket_id":"T-00001"`, "the LLM reads the ticket filed the first time")
}

// TestResumeAfterSIGKILLLeavesNoPhantomSpans kills the executor while iteration 2's LLM
// call is in flight, so the dead attempt leaves iteration 2 and its llm_call running. The
// attempt that resumes the run closes them as abandoned (and says so on the event stream),
// gets iteration 2 back instead of making a second one, and replays iteration 1 without a
// span: each iteration appears once, numbered by its step, and every executor span names
// its attempt.
func TestResumeAfterSIGKILLLeavesNoPhantomSpans(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{
		SimArgs: []string{"--model", "sim-fast=latency=constant:1500ms,output=uniform:10-30"}}})
	b.putSkill(t, reactSkill("weather_twice", []string{"demo_weather"}, 5))
	jobID := b.dispatch(t, "weather_twice", map[string]any{"prompt": "Weather in Oslo"})
	waitFor(t, 30*time.Second, "iteration 2's LLM call in flight", func() bool {
		return b.journaled(t, jobID, "iter/1/tool/%") == 1 && b.simStats(t).InFlight == 1
	})
	b.kill(t, "executor", syscall.SIGKILL)
	running := 0
	for _, s := range b.spans(t, jobID) {
		if s["status"] == "running" {
			running++
		}
	}
	require.Equal(t, 2, running, "the dead attempt left iteration 2 and its llm_call running")

	b.StartExecutor()
	r := b.WaitStatus(jobID, 60*time.Second, "completed", "failed", "completed_max_iterations")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, 2.0, r["attempts"])

	spans := b.spans(t, jobID)
	for _, s := range spans {
		require.NotEqual(t, "running", s["status"], "no span is left running: %v", s)
	}
	iterations := map[float64]map[string]any{}
	attemptsOf := map[string][]float64{}
	var abandoned, llm2 []map[string]any
	for _, s := range spans {
		attrs := s["attributes"].(map[string]any)
		attempt, _ := s["attempt"].(float64)
		typ := s["type"].(string)
		attemptsOf[typ] = append(attemptsOf[typ], attempt)
		switch {
		case typ == "react_iteration":
			n := attrs["iteration"].(float64)
			require.NotContains(t, iterations, n, "iteration %v appears once", n)
			require.Equal(t, fmt.Sprintf("iteration %v", n), s["name"])
			require.Equal(t, fmt.Sprintf("iter/%v", n), attrs["step"])
			iterations[n] = s
		case s["status"] == "abandoned":
			abandoned = append(abandoned, s)
		case typ == "llm_call" && attrs["step"] == "iter/2/llm":
			llm2 = append(llm2, s)
		}
	}
	require.Len(t, iterations, 2)
	for _, n := range []float64{1, 2} {
		require.Equal(t, "ok", iterations[n]["status"])
		require.Equal(t, 1.0, iterations[n]["attempt"], "the first attempt made iteration %v", n)
	}
	require.Equal(t, 2.0, iterations[2]["attributes"].(map[string]any)["resumed_by_attempt"], "the second attempt finished it")

	require.Len(t, abandoned, 1, "%v", abandoned)
	require.Equal(t, "llm_call", abandoned[0]["type"])
	require.Equal(t, 1.0, abandoned[0]["attempt"])
	require.Equal(t, 2.0, abandoned[0]["attributes"].(map[string]any)["abandoned_by_attempt"])
	require.NotNil(t, abandoned[0]["endedAt"])
	require.Len(t, llm2, 1)
	require.Equal(t, 2.0, llm2[0]["attempt"])
	require.Equal(t, iterations[2]["id"], llm2[0]["parentId"], "the new call hangs under the same iteration")

	require.ElementsMatch(t, []float64{1, 2}, attemptsOf["skill_resolve"], "each attempt resolved the skill")
	require.ElementsMatch(t, []float64{0}, attemptsOf["dispatch"], "the dispatcher's spans have no attempt")

	// The stream told the UI: the abandoned span was sent as job:span with its new status.
	var sent bool
	for _, e := range b.events(t, jobID) {
		if d, ok := e["data"].(map[string]any); ok && e["type"] == "job:span" && d["status"] == "abandoned" {
			sent = true
		}
	}
	require.True(t, sent, "job:span carried the abandoned span")
}

// TestCancelRunningJob cancels a run while its LLM call is in flight: the call is
// cancelled through the context and the run ends cancelled.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=constant:20s"}}})
	jobID := b.dispatch(t, "demo_llm", map[string]any{"prompt": "Hello"})
	waitFor(t, 30*time.Second, "the LLM call in flight", func() bool { return b.simStats(t).InFlight == 1 })
	b.cancel(t, jobID)
	r := b.WaitStatus(jobID, 15*time.Second, "cancelled", "completed", "failed")
	require.Equal(t, "cancelled", r["status"], "%v", r)
	require.Equal(t, "CANCELLED", r["error"].(map[string]any)["code"])
	waitFor(t, 10*time.Second, "sim-llm to see the call cancelled", func() bool { return b.simStats(t).Cancelled == 1 })
	require.Zero(t, b.simStats(t).Served)
	require.Contains(t, eventTypes(b.events(t, jobID)), "job:cancelled")
}

// TestRunTimesOut gives a skill a 1 s timeout and an LLM that takes 5 s.
func TestRunTimesOut(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=constant:5s"}}})
	one := 1
	b.putSkill(t, skill.Skill{JobType: "quick", ExecutionType: "llm_only", RoutingHint: "fast", TimeoutSeconds: &one})
	jobID := b.dispatch(t, "quick", map[string]any{"prompt": "Hello"})
	r := b.WaitStatus(jobID, 30*time.Second, "timed_out", "completed", "failed")
	require.Equal(t, "timed_out", r["status"], "%v", r)
	require.Equal(t, "TIMED_OUT", r["error"].(map[string]any)["code"])
}

// TestToolApproval pauses a run before a tool that requires approval, holding no worker;
// an approval resumes it and the tool is called once; a rejection ends the run rejected
// without calling the tool.
func TestToolApproval(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putTool(t, tool.Tool{Name: "refund", Description: "Refund an order.", Method: "POST",
		URLTemplate: b.toolURL + "/tickets", SideEffecting: true, RequiresApproval: true, AllowPrivate: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":3}},"required":["title"]}`)})
	b.putSkill(t, reactSkill("refunder", []string{"refund"}, 3))

	for _, decision := range []string{"approve", "reject"} {
		jobID := b.dispatch(t, "refunder", map[string]any{"prompt": "Refund order 42 " + decision})
		r := b.WaitStatus(jobID, 30*time.Second, "pending_review", "completed", "failed")
		require.Equal(t, "pending_review", r["status"], "%v", r)
		require.Contains(t, fmt.Sprint(r["holdReasons"]), "TOOL_REQUIRES_APPROVAL")
		var held map[string]any
		for _, e := range b.events(t, jobID) {
			if e["type"] == "job:held" {
				held = e["data"].(map[string]any)
			}
		}
		require.NotNil(t, held)
		call := held["tools"].([]any)[0].(map[string]any)
		require.Equal(t, "refund", call["tool"])
		require.NotEmpty(t, call["arguments"].(map[string]any)["title"])
		before := b.toolStats(t).Tickets

		b.review(t, jobID, decision)
		if decision == "approve" {
			r = b.WaitStatus(jobID, 30*time.Second, "completed", "failed", "rejected", "pending_review")
			require.Equal(t, "completed", r["status"], "%v", r)
			require.Equal(t, before+1, b.toolStats(t).Tickets)
		} else {
			r = b.WaitStatus(jobID, 30*time.Second, "rejected", "completed", "failed")
			require.Equal(t, "rejected", r["status"], "%v", r)
			require.Equal(t, before, b.toolStats(t).Tickets)
		}
		// The LLM call before the pause was journaled and not repeated on resume.
		require.Equal(t, 1, b.journaled(t, jobID, "iter/1/llm"))
	}
}

// TestTransientFailuresRetryThenFail makes every upstream call fail: the run is retried
// with backoff and fails after its last retry, with every attempt's error visible.
func TestTransientFailuresRetryThenFail(t *testing.T) {
	t.Parallel()
	// The provider's circuit never opens here: an open circuit parks runs instead
	// (TestOpenCircuitParksRuns).
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=error_rate=1"},
		ExtraEnv: []string{"SWITCHYARD_ROUTER_BREAKER_FAILURES=1000"}}})
	two := 2
	b.putSkill(t, skill.Skill{JobType: "flaky", ExecutionType: "llm_only", RoutingHint: "fast", MaxRetries: &two})
	jobID := b.dispatch(t, "flaky", map[string]any{"prompt": "Hello"})
	r := b.WaitStatus(jobID, 60*time.Second, "failed", "completed")
	require.Equal(t, "failed", r["status"], "%v", r)
	require.Equal(t, 3.0, r["attempts"])
	require.Len(t, r["attemptErrors"], 3, "%v", r["attemptErrors"])
	require.Contains(t, eventTypes(b.events(t, jobID)), "job:retrying")
}

// TestOpenCircuitParksRuns: once a failing provider's circuit opens, runs wait parked
// (provider_unavailable) instead of spending their retries against it, and end only when
// their wait exceeds the maximum queue time — failed PROVIDER_UNAVAILABLE, saying so.
func TestOpenCircuitParksRuns(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=error_rate=1"},
		ExtraEnv: []string{"SWITCHYARD_ROUTER_BREAKER_FAILURES=2", "SWITCHYARD_ROUTER_BREAKER_OPEN=2s",
			"SWITCHYARD_MAX_QUEUE_TIME=6s"}}})
	five := 5
	b.putSkill(t, skill.Skill{JobType: "outage", ExecutionType: "llm_only", RoutingHint: "fast", MaxRetries: &five})
	jobID := b.dispatch(t, "outage", map[string]any{"prompt": "Hello"})
	r := b.WaitStatus(jobID, 60*time.Second, "failed", "completed")
	require.Equal(t, "failed", r["status"], "%v", r)
	require.Equal(t, "PROVIDER_UNAVAILABLE", r["error"].(map[string]any)["code"], "%v", r)
	require.Less(t, len(r["attemptErrors"].([]any)), 6, "parks spent no retries: %v", r["attemptErrors"])
	parked := false
	for _, e := range b.events(t, jobID) {
		if e["type"] == "job:waiting" && e["data"].(map[string]any)["reason"] == "provider_unavailable" {
			parked = true
		}
	}
	require.True(t, parked)
}

// TestSIGTERMDrains stops the executor while jobs are in flight: with a short grace the
// jobs go back to their queue and a new executor finishes them; none is lost.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true,
		SimArgs: []string{"--model", "sim-fast=latency=constant:3s"}}})
	b.startWith(t, "executor", []string{"SWITCHYARD_SHUTDOWN_GRACE=300ms"})
	var ids []string
	for range 4 {
		ids = append(ids, b.dispatch(t, "demo_llm", map[string]any{"prompt": "Hello"}))
	}
	waitFor(t, 30*time.Second, "every call in flight", func() bool { return b.simStats(t).InFlight == 4 })
	b.kill(t, "executor", syscall.SIGTERM)
	for _, id := range ids {
		_, r := b.Do(http.MethodGet, "/api/v1/dispatch/"+id, nil)
		require.Equal(t, "running", r["status"], "an interrupted run is neither failed nor lost")
	}
	b.StartExecutor() // default grace
	for _, id := range ids {
		r := b.WaitStatus(id, 60*time.Second, "completed", "failed")
		require.Equal(t, "completed", r["status"], "%v", r)
	}

	// With enough grace, in-flight jobs finish before the executor exits.
	id := b.dispatch(t, "demo_llm", map[string]any{"prompt": "Hello again"})
	waitFor(t, 30*time.Second, "the call in flight", func() bool { return b.simStats(t).InFlight == 1 })
	b.kill(t, "executor", syscall.SIGTERM)
	_, r := b.Do(http.MethodGet, "/api/v1/dispatch/"+id, nil)
	require.Equal(t, "completed", r["status"], "%v", r)
}

// TestExecutorGPU checks executor-gpu: it refuses CPU-class queues, says when no GPU is
// visible, and reports telemetry from nvidia-smi as job:gpu_metrics on the runs it executes.
func TestExecutorGPU(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true}})

	cmd := b.H.Command(context.Background(), "executor-gpu")
	cmd.Env = append(cmd.Env, "SWITCHYARD_QUEUES=default")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "executor-gpu must refuse a cpu queue")
	require.Contains(t, string(out), `queue "default" is a cpu queue`)

	// No nvidia-smi on PATH: it runs, and says so.
	addr := b.H.Addr("executor-gpu")
	b.startWith(t, "executor-gpu", []string{"PATH=/nonexistent"})
	health := func() map[string]any {
		resp, err := http.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		defer resp.Body.Close()
		var h map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
		return h
	}
	h := health()
	require.Equal(t, false, h["gpu"].(map[string]any)["visible"], "%v", h)
	require.Equal(t, []any{"gpu"}, h["queues"])
	b.kill(t, "executor-gpu", syscall.SIGTERM)

	// A (fake) nvidia-smi: the run carries job:gpu_metrics.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"),
		[]byte("#!/bin/sh\necho '0, Fake A100, GPU-0000, 42, 7, 1024, 40960, 55, 120.5'\n"), 0o755))
	b.startWith(t, "executor-gpu", []string{"PATH=" + dir + ":" + os.Getenv("PATH")})
	h = health()
	require.Equal(t, true, h["gpu"].(map[string]any)["visible"], "%v", h)

	b.putSkill(t, skill.Skill{JobType: "gpu_job", ExecutionType: "llm_only", RoutingHint: "fast", Queue: "gpu"})
	jobID := b.dispatch(t, "gpu_job", map[string]any{"prompt": "Hello"})
	r := b.WaitStatus(jobID, 30*time.Second, "completed", "failed")
	require.Equal(t, "completed", r["status"], "%v", r)
	var metrics map[string]any
	for _, e := range b.events(t, jobID) {
		if e["type"] == "job:gpu_metrics" {
			metrics = e["data"].(map[string]any)
		}
	}
	require.NotNil(t, metrics)
	g := metrics["gpus"].([]any)[0].(map[string]any)
	require.Equal(t, "Fake A100", g["name"])
	require.Equal(t, 42.0, g["utilization_gpu_pct"])
}
