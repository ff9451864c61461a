package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Chains (Tier 3) through the real processes: dispatcher (with its coordinator), executor,
// router and sim-llm, on the test's own Postgres and Redis.

// putChain binds a step skill ("c_step", llm_only) and a chain skill of def.
func (b *execBundle) putChain(t *testing.T, jobType, def string, stepSkills ...skill.Skill) {
	t.Helper()
	b.putSkill(t, skill.Skill{JobType: "c_step", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16,
		SystemPrompt: "Answer briefly."})
	for _, s := range stepSkills {
		b.putSkill(t, s)
	}
	b.putSkill(t, skill.Skill{JobType: jobType, ExecutionType: "chain", Chain: json.RawMessage(def)})
}

// dispatchChain dispatches a chain skill and returns its chain and parent run ids.
func (b *execBundle) dispatchChain(t *testing.T, jobType string, input any) (chainID, jobID string) {
	t.Helper()
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": jobType, "payload": input})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	require.NotEmpty(t, res["chainId"], "%v", res)
	return res["chainId"].(string), res["jobId"].(string)
}

// chain reads GET /api/v1/chains/{id}.
func (b *execBundle) chain(t *testing.T, id string) map[string]any {
	t.Helper()
	code, res := b.Do(http.MethodGet, "/api/v1/chains/"+id, nil)
	require.Equal(t, http.StatusOK, code, "%v", res)
	return res
}

// waitChain waits until the chain's status is one of want.
func (b *execBundle) waitChain(t *testing.T, id string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, timeout, "chain "+id+" to reach "+join(want), func() bool {
		last = b.chain(t, id)
		return slices.Contains(want, last["status"].(string))
	})
	return last
}

// waitStep waits until a step (its first instance row) has one of the statuses.
func (b *execBundle) waitStep(t *testing.T, id, stepID string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	var got map[string]any
	waitFor(t, timeout, "step "+stepID+" to reach "+join(want), func() bool {
		got = step(b.chain(t, id), stepID)
		return got != nil && slices.Contains(want, got["status"].(string))
	})
	return got
}

func join(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func step(c map[string]any, id string) map[string]any {
	for _, s := range c["steps"].([]any) {
		if m := s.(map[string]any); m["stepId"] == id {
			return m
		}
	}
	return nil
}

func steps(c map[string]any, id string) []map[string]any {
	var out []map[string]any
	for _, s := range c["steps"].([]any) {
		if m := s.(map[string]any); m["stepId"] == id {
			out = append(out, m)
		}
	}
	return out
}

// stepRuns counts the runs recorded for each chain_step label of a chain.
func (b *execBundle) stepRuns(t *testing.T, chainID string) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT chain_step, count(*) FROM runs WHERE chain_id = $1 AND chain_step IS NOT NULL GROUP BY chain_step`, chainID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var label string
		var n int
		require.NoError(t, rows.Scan(&label, &n))
		out[label] = n
	}
	return out
}

const researchChain = `{"steps":[
	{"step_id":"plan","job_type":"c_step","payload":{"prompt":"Plan research on {{input.topic}}"}},
	{"step_id":"market","job_type":"c_step","depends_on":["plan"],"payload":{"prompt":"Market view"}},
	{"step_id":"risks","job_type":"c_step","depends_on":["plan"],"payload":{"prompt":"Risks"},
	 "condition":{"field":"plan.output.content","operator":"contains","value":"no such words appear"}},
	{"step_id":"tech","job_type":"c_step","depends_on":["plan"],"payload":{"prompt":"Technology"}},
	{"step_id":"synth","job_type":"c_step","depends_on":["market","risks","tech"],
	 "payload":{"prompt":"Synthesise"},
	 "output_mapping":{"market.output.content":"payload.market","risks.output.content":"payload.risks"}}]}`

// TestChainRunsEndToEnd: a chain's roots start at dispatch, a fork runs in parallel, a
// condition skips a branch, the join waits for every parent and gets their outputs, and
// the parent run ends with the aggregated outputs — events and spans drawn on the way.
func TestChainRunsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_research", researchChain)
	chainID, jobID := b.dispatchChain(t, "c_research", map[string]any{"topic": "otters"})

	c := b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "completed", c["status"], "%v", c)
	require.Equal(t, jobID, c["jobId"])
	require.EqualValues(t, 1, c["progress"])
	want := map[string]string{"plan": "completed", "market": "completed", "risks": "skipped", "tech": "completed", "synth": "completed"}
	for id, st := range want {
		require.Equal(t, st, step(c, id)["status"], "step %s: %v", id, step(c, id))
	}
	require.Greater(t, c["costUsd"].(float64), 0.0)
	require.Equal(t, map[string]int{"plan": 1, "market": 1, "tech": 1, "synth": 1}, b.stepRuns(t, chainID),
		"each step dispatched once; the skipped one never")

	// The references and mappings reached the steps' payloads.
	var planPayload, synthPayload map[string]any
	ctx := context.Background()
	var raw []byte
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT payload FROM runs WHERE chain_id = $1 AND chain_step = 'plan'`, chainID).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &planPayload))
	require.Equal(t, "Plan research on otters", planPayload["prompt"])
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT payload FROM runs WHERE chain_id = $1 AND chain_step = 'synth'`, chainID).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &synthPayload))
	require.Equal(t, step(c, "market")["output"].(map[string]any)["content"], synthPayload["market"])
	require.Contains(t, synthPayload, "risks")
	require.Nil(t, synthPayload["risks"], "a skipped parent maps null")

	// The join started after each of its parents had finished.
	var joinStart time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT started_at FROM runs WHERE chain_id = $1 AND chain_step = 'synth'`, chainID).Scan(&joinStart))
	for _, p := range []string{"market", "tech"} {
		var fin time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT finished_at FROM runs WHERE chain_id = $1 AND chain_step = $2`, chainID, p).Scan(&fin))
		require.True(t, joinStart.After(fin), "synth started %s before %s finished %s", joinStart, p, fin)
	}

	// The parent run ended with the outputs, and its journal tells the chain's story.
	r := b.WaitStatus(jobID, 10*time.Second, "completed")
	out := r["output"].(map[string]any)["steps"].(map[string]any)
	require.Contains(t, out, "synth")
	require.NotContains(t, out, "risks")
	types := eventTypes(b.events(t, jobID))
	for _, typ := range []string{"job:queued", "job:started", "chain:step_dispatched", "chain:fork", "chain:join",
		"chain:step_ended", "chain:progress", "job:completed"} {
		require.Contains(t, types, typ)
	}
	// One span tree: chain_step spans under the parent's dispatch span, each step run's
	// dispatch span under its chain_step span.
	spans := b.spans(t, jobID)
	kinds := map[string]int{}
	for _, s := range spans {
		kinds[s["type"].(string)]++
	}
	require.Equal(t, 5, kinds["chain_step"], "%v", kinds)
	require.Equal(t, 1, kinds["chain_fork"], "%v", kinds)
	require.Equal(t, 1, kinds["chain_join"], "%v", kinds)
	var synthSpan string
	for _, s := range spans {
		if s["type"] == "chain_step" && s["attributes"].(map[string]any)["step_id"] == "synth" {
			synthSpan = s["id"].(string)
		}
	}
	synthRun := step(c, "synth")["jobId"].(string)
	var parentOfRoot string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT parent_id::text FROM spans WHERE id = $1`, synthRun).Scan(&parentOfRoot))
	require.Equal(t, synthSpan, parentOfRoot, "the step run's tree hangs under its chain_step span")

	// The list shows it.
	code, list := b.Do(http.MethodGet, "/api/v1/chains?status=completed", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, chainID, list["items"].([]any)[0].(map[string]any)["chainId"])
}

// TestChainForEachFansOutOverTheInput: one instance per item, the join waits for all.
func TestChainForEachFansOutOverTheInput(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_fan", `{"steps":[
		{"step_id":"each","job_type":"c_step","for_each":"input.docs","max_items":5,"payload":{"prompt":"Summarise {{item.title}}"}},
		{"step_id":"all","job_type":"c_step","depends_on":["each"],"payload":{"prompt":"Combine"},
		 "output_mapping":{"each.output.2.content":"payload.third"}}]}`)
	chainID, _ := b.dispatchChain(t, "c_fan", map[string]any{"docs": []any{
		map[string]any{"title": "a"}, map[string]any{"title": "b"}, map[string]any{"title": "c"}}})
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
	inst := steps(c, "each")
	require.Len(t, inst, 3)
	for i, s := range inst {
		require.EqualValues(t, i, s["instance"])
		require.EqualValues(t, 3, s["instances"])
		require.Equal(t, "completed", s["status"])
	}
	require.Equal(t, map[string]int{"each[0]": 1, "each[1]": 1, "each[2]": 1, "all": 1}, b.stepRuns(t, chainID))

	// Too many items: the step fails with CHAIN_FOR_EACH_INVALID and the chain with it.
	chainID, _ = b.dispatchChain(t, "c_fan", map[string]any{"docs": []any{1, 2, 3, 4, 5, 6}})
	c = b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "failed", c["status"])
	require.Equal(t, "CHAIN_FOR_EACH_INVALID", step(c, "each")["error"].(map[string]any)["code"])
	require.Empty(t, b.stepRuns(t, chainID))
}

// TestChainHeldStepApprovedAndRejected: a critical step is held for review and the chain
// waits on it; approval lets the chain go on, rejection fails it (abort).
func TestChainHeldStepApprovedAndRejected(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_audit", `{"steps":[
		{"step_id":"scan","job_type":"c_step","payload":{"prompt":"scan"}},
		{"step_id":"fix","job_type":"c_fix","depends_on":["scan"],"payload":{"prompt":"fix"}},
		{"step_id":"report","job_type":"c_step","depends_on":["fix"],"payload":{"prompt":"report"}}]}`,
		skill.Skill{JobType: "c_fix", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16, RiskLevel: "critical"})

	chainID, _ := b.dispatchChain(t, "c_audit", map[string]any{})
	fix := b.waitStep(t, chainID, "fix", time.Minute, "held_for_review")
	require.Equal(t, "pending", step(b.chain(t, chainID), "report")["status"])
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+fix["jobId"].(string)+"/approve", map[string]any{"reason": "ok"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)

	chainID, jobID := b.dispatchChain(t, "c_audit", map[string]any{})
	fix = b.waitStep(t, chainID, "fix", time.Minute, "held_for_review")
	code, res = b.Do(http.MethodPost, "/api/v1/dispatch/"+fix["jobId"].(string)+"/reject", map[string]any{"reason": "no"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	c = b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "failed", c["status"], "%v", c)
	require.Equal(t, "rejected", step(c, "fix")["status"])
	require.Equal(t, "cancelled", step(c, "report")["status"])
	b.WaitStatus(jobID, 10*time.Second, "failed")
}

// TestChainCancelAndRerun: cancelling a chain cancels its held and pending steps and its
// parent run; a rerun reuses the completed step's output and runs the rest.
func TestChainCancelAndRerun(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_cancel", `{"steps":[
		{"step_id":"first","job_type":"c_step","payload":{"prompt":"one"}},
		{"step_id":"held","job_type":"c_crit","depends_on":["first"],"payload":{"prompt":"two"}},
		{"step_id":"last","job_type":"c_step","depends_on":["held"],"payload":{"prompt":"three"}}]}`,
		skill.Skill{JobType: "c_crit", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16, RiskLevel: "critical"})
	chainID, jobID := b.dispatchChain(t, "c_cancel", map[string]any{})
	held := b.waitStep(t, chainID, "held", time.Minute, "held_for_review")

	code, res := b.Do(http.MethodPost, "/api/v1/chains/"+chainID+"/cancel", nil)
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, "cancelled", res["status"])
	c := b.chain(t, chainID)
	require.Equal(t, "cancelled", c["status"])
	require.Equal(t, "cancelled", step(c, "held")["status"])
	require.Equal(t, "cancelled", step(c, "last")["status"])
	b.WaitStatus(held["jobId"].(string), 10*time.Second, "cancelled")
	b.WaitStatus(jobID, 10*time.Second, "cancelled")
	code, res = b.Do(http.MethodPost, "/api/v1/chains/"+chainID+"/cancel", nil)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "CHAIN_ALREADY_FINISHED", res["code"])

	code, res = b.Do(http.MethodPost, "/api/v1/chains/"+chainID+"/rerun", nil)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	again := res["chainId"].(string)
	require.Equal(t, []any{"first"}, res["reused"])
	require.Equal(t, chainID, res["rerunOf"])
	held = b.waitStep(t, again, "held", time.Minute, "held_for_review")
	c = b.chain(t, again)
	require.Equal(t, true, step(c, "first")["reused"])
	require.Equal(t, step(b.chain(t, chainID), "first")["output"], step(c, "first")["output"])
	require.NotContains(t, b.stepRuns(t, again), "first", "a reused step is not run again")

	code, res = b.Do(http.MethodPost, "/api/v1/chains/"+again+"/rerun", nil)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "CHAIN_NOT_FINISHED", res["code"])

	// Another organisation sees none of it.
	other := b.otherOrgKey(t)
	code, _ = b.DoKey(other, http.MethodGet, "/api/v1/chains/"+again, nil)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = b.DoKey(other, http.MethodPost, "/api/v1/chains/"+again+"/cancel", nil)
	require.Equal(t, http.StatusNotFound, code)
}

// TestChainDefinitionCheckedAtDispatch: a step whose skill was disabled after the chain
// was saved refuses the dispatch, naming the field; nothing is written.
func TestChainDefinitionCheckedAtDispatch(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true}})
	b.putChain(t, "c_check", `{"steps":[{"step_id":"a","job_type":"c_gone"}]}`,
		skill.Skill{JobType: "c_gone", ExecutionType: "llm_only"})
	_, err := b.pool.Exec(context.Background(), `UPDATE skills SET enabled = false WHERE job_type = 'c_gone'`)
	require.NoError(t, err)
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": "c_check", "payload": map[string]any{}})
	require.Equal(t, http.StatusBadRequest, code, "%v", res)
	require.Equal(t, "VALIDATION_FAILED", res["code"])
	require.Contains(t, res["message"], `job_type "c_gone"`)
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM chains`).Scan(&n))
	require.Zero(t, n)
}

// TestChainSurvivesDispatcherSIGKILL kills the dispatcher — and with it the coordinator —
// while a chain runs; the restarted one carries it to its end, nothing dispatched twice.
func TestChainSurvivesDispatcherSIGKILL(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=150ms"},
		ExtraEnv: []string{"SWITCHYARD_RECONCILE_EVERY=200ms", "SWITCHYARD_RECONCILE_GRACE=1s"}}})
	b.putChain(t, "c_long", `{"steps":[
		{"step_id":"s1","job_type":"c_step","payload":{"prompt":"1"}},
		{"step_id":"s2","job_type":"c_step","depends_on":["s1"],"payload":{"prompt":"2"}},
		{"step_id":"s3","job_type":"c_step","depends_on":["s2"],"payload":{"prompt":"3"}},
		{"step_id":"s4","job_type":"c_step","depends_on":["s3"],"payload":{"prompt":"4"}},
		{"step_id":"s5","job_type":"c_step","depends_on":["s4"],"payload":{"prompt":"5"}}]}`)
	chainID, _ := b.dispatchChain(t, "c_long", map[string]any{})
	b.waitStep(t, chainID, "s2", time.Minute, "queued", "running", "completed")
	b.kill(t, harness.Dispatcher, syscall.SIGKILL)
	b.startWith(t, harness.Dispatcher, nil)
	c := b.waitChain(t, chainID, 2*time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
	require.Equal(t, map[string]int{"s1": 1, "s2": 1, "s3": 1, "s4": 1, "s5": 1}, b.stepRuns(t, chainID))
}

// TestChainDuplicateReportsDispatchNothingTwice reports every step's end again, by new
// tasks, while the chain runs and after: the chain's runs stay one per step.
func TestChainDuplicateReportsDispatchNothingTwice(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_dup", `{"steps":[
		{"step_id":"a","job_type":"c_step","payload":{"prompt":"a"}},
		{"step_id":"b","job_type":"c_step","depends_on":["a"],"payload":{"prompt":"b"}},
		{"step_id":"c","job_type":"c_step","depends_on":["a"],"payload":{"prompt":"c"}},
		{"step_id":"d","job_type":"c_step","depends_on":["b","c"],"payload":{"prompt":"d"}}]}`)
	chainID, _ := b.dispatchChain(t, "c_dup", map[string]any{})
	a := b.waitStep(t, chainID, "a", time.Minute, "completed")
	client := queue.NewClient(b.asynq)
	defer client.Close()
	report := func(runID string, n int) {
		for i := range n {
			task, err := queue.NewStepDoneTask(queue.StepDone{ChainID: chainID, RunID: runID})
			require.NoError(t, err)
			_, err = client.EnqueueContext(context.Background(), task,
				asynqTaskID("dup:"+runID+":"+time.Now().Format(time.RFC3339Nano)+":"+string(rune('a'+i))))
			require.NoError(t, err)
		}
	}
	report(a["jobId"].(string), 5)
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"])
	for _, s := range []string{"a", "b", "c", "d"} {
		report(step(c, s)["jobId"].(string), 3)
	}
	// Every duplicate was handled once the coordinator queue is empty again.
	waitFor(t, 30*time.Second, "the coordinator queue to drain", func() bool {
		n, err := coordinatorBacklog(b)
		return err == nil && n == 0
	})
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, b.stepRuns(t, chainID))
	var joins int
	for _, e := range b.events(t, c["jobId"].(string)) {
		if e["type"] == "chain:join" {
			joins++
		}
	}
	require.Equal(t, 1, joins)
}

// TestChainSurvivesRedisLoss flushes Redis while a chain waits on a held step and again
// while its steps run: the reconciler restores the queued steps and the unreported ends
// from Postgres, and the chain completes with each step run once.
func TestChainSurvivesRedisLoss(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{
		ExtraEnv: []string{"SWITCHYARD_RECONCILE_EVERY=200ms", "SWITCHYARD_RECONCILE_GRACE=1s"}}})
	b.putChain(t, "c_flush", `{"steps":[
		{"step_id":"gate","job_type":"c_crit","payload":{"prompt":"gate"}},
		{"step_id":"x","job_type":"c_step","depends_on":["gate"],"payload":{"prompt":"x"}},
		{"step_id":"y","job_type":"c_step","depends_on":["gate"],"payload":{"prompt":"y"}},
		{"step_id":"z","job_type":"c_step","depends_on":["x","y"],"payload":{"prompt":"z"}}]}`,
		skill.Skill{JobType: "c_crit", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16, RiskLevel: "critical"})
	chainID, _ := b.dispatchChain(t, "c_flush", map[string]any{})
	gate := b.waitStep(t, chainID, "gate", time.Minute, "held_for_review")
	b.flushRedis(t)
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+gate["jobId"].(string)+"/approve", map[string]any{"reason": "ok"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	b.waitStep(t, chainID, "x", time.Minute, "queued", "running", "completed")
	b.flushRedis(t)
	c := b.waitChain(t, chainID, 2*time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
	require.Equal(t, map[string]int{"gate": 1, "x": 1, "y": 1, "z": 1}, b.stepRuns(t, chainID))
}

func asynqTaskID(id string) asynq.Option { return asynq.TaskID(id) }

// coordinatorBacklog counts the coordinator queue's tasks not yet done.
func coordinatorBacklog(b *execBundle) (int, error) {
	insp := asynq.NewInspector(b.asynq)
	defer insp.Close()
	info, err := insp.GetQueueInfo(queue.Coordinator)
	if err != nil {
		return 0, err
	}
	return info.Pending + info.Active + info.Scheduled + info.Retry, nil
}

// flushRedis empties the stack's Redis database, as a Redis that lost its data.
func (b *execBundle) flushRedis(t *testing.T) {
	t.Helper()
	opts, err := redis.ParseURL(b.H.RedisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	require.NoError(t, rdb.FlushDB(context.Background()).Err())
}

// otherOrgKey bootstraps a second organisation and returns its admin key.
func (b *execBundle) otherOrgKey(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "other.key")
	skills, err := filepath.Abs(filepath.Join("..", "skills"))
	require.NoError(t, err)
	b.runOnce("dispatcher", "bootstrap", "--org", "other-org", "--key-file", file, "--skills", skills, "--sim-url", b.SimURL+"/v1")
	key, err := os.ReadFile(file)
	require.NoError(t, err)
	return strings.TrimSpace(string(key))
}

// TestCatalogueChains runs the README's chains from skills/: demo_research (its
// regulation branch skipped by its condition) and demo_audit (its critical step approved).
func TestCatalogueChains(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	chainID, jobID := b.dispatchChain(t, "demo_research", map[string]any{"topic": "otters"})
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
	require.Equal(t, "skipped", step(c, "regulation")["status"])
	b.WaitStatus(jobID, 10*time.Second, "completed")

	chainID, _ = b.dispatchChain(t, "demo_audit", map[string]any{"system": "billing"})
	fix := b.waitStep(t, chainID, "remediate", time.Minute, "held_for_review")
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+fix["jobId"].(string)+"/approve", map[string]any{"reason": "ok"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	c = b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
}

// TestChainCostCeilingStopsTheStepThatWouldCrossIt: the router checks every step's call
// against the chain's ceiling; the step that would cross it fails with BUDGET_EXCEEDED,
// and the chain with it, before the provider is asked.
func TestChainCostCeilingStopsTheStepThatWouldCrossIt(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_money", `{"cost_ceiling_usd":0.0000001,"steps":[
		{"step_id":"first","job_type":"c_step","payload":{"prompt":"spend"}},
		{"step_id":"second","job_type":"c_step","depends_on":["first"],"payload":{"prompt":"more"}}]}`)
	before := b.simStats(t)
	chainID, _ := b.dispatchChain(t, "c_money", map[string]any{})
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed")
	require.Equal(t, "failed", c["status"], "%v", c)
	first := step(c, "first")
	require.Equal(t, "failed", first["status"], "%v", first)
	require.Equal(t, "BUDGET_EXCEEDED", first["error"].(map[string]any)["code"], "%v", first["error"])
	require.Equal(t, "cancelled", step(c, "second")["status"])
	require.Equal(t, before, b.simStats(t), "the provider was never called")
}

// TestCriticalChainIsHeldWhole: a chain skill that is critical holds the whole chain —
// nothing runs until its parent run is approved; rejecting it ends the chain.
func TestCriticalChainIsHeldWhole(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_sensitive", `{"steps":[{"step_id":"only","job_type":"c_step","payload":{"prompt":"go"}}]}`)
	_, err := b.pool.Exec(context.Background(), `UPDATE skills SET risk_level = 'critical' WHERE job_type = 'c_sensitive'`)
	require.NoError(t, err)
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": "c_sensitive", "payload": map[string]any{}})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	require.Equal(t, "held_for_review", res["status"])
	chainID, jobID := res["chainId"].(string), res["jobId"].(string)
	require.Equal(t, "pending", step(b.chain(t, chainID), "only")["status"])
	code, res = b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/approve", map[string]any{"reason": "ok"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled")
	require.Equal(t, "completed", c["status"], "%v", c)

	code, res = b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": "c_sensitive", "payload": map[string]any{}})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	chainID, jobID = res["chainId"].(string), res["jobId"].(string)
	code, res = b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/reject", map[string]any{"reason": "no"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	c = b.waitChain(t, chainID, 30*time.Second, "completed", "failed", "cancelled")
	require.Equal(t, "cancelled", c["status"], "%v", c)
	require.Empty(t, b.stepRuns(t, chainID))
}

// TestChainTimesOut: a chain past its timeout_seconds ends timed_out — its held step
// cancelled, its parent run timed_out — whether its deadline task fires or the reconciler
// finds it.
func TestChainTimesOut(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putChain(t, "c_slow", `{"timeout_seconds":1,"steps":[{"step_id":"wait","job_type":"c_crit","payload":{"prompt":"x"}}]}`,
		skill.Skill{JobType: "c_crit", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16, RiskLevel: "critical"})
	chainID, jobID := b.dispatchChain(t, "c_slow", map[string]any{})
	c := b.waitChain(t, chainID, 30*time.Second, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "timed_out", c["status"], "%v", c)
	require.Equal(t, "cancelled", step(c, "wait")["status"])
	require.Equal(t, "TIMED_OUT", c["error"].(map[string]any)["code"])
	b.WaitStatus(jobID, 10*time.Second, "timed_out")
}

// TestChainDispatchIsIdempotent: a chain dispatched again with the same idempotency key
// answers the first chain, and only one exists.
func TestChainDispatchIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{NoExecutor: true}})
	b.putChain(t, "c_once", `{"steps":[{"step_id":"a","job_type":"c_step","payload":{"prompt":"a"}}]}`)
	body := map[string]any{"job_type": "c_once", "payload": map[string]any{}, "idempotency_key": "order-1"}
	code, first := b.Do(http.MethodPost, "/api/v1/dispatch", body)
	require.Equal(t, http.StatusAccepted, code, "%v", first)
	code, again := b.Do(http.MethodPost, "/api/v1/dispatch", body)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code, "%v", again)
	require.Equal(t, true, again["duplicate"])
	require.Equal(t, first["jobId"], again["jobId"])
	require.Equal(t, first["chainId"], again["chainId"])
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM chains`).Scan(&n))
	require.Equal(t, 1, n)
}
