package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Workflows (GitHub Actions syntax) through the real processes: the catalogue's workflows
// registered by the bootstrap, dispatched by job type, ad hoc ones run from their text;
// each compiled to a chain the coordinator runs.

// jobOf returns a workflow run's job from GET /api/v1/chains/{id}.
func jobOf(c map[string]any, id string) map[string]any {
	w, _ := c["workflow"].(map[string]any)
	jobs, _ := w["jobs"].([]any)
	for _, j := range jobs {
		if m := j.(map[string]any); m["id"] == id {
			return m
		}
	}
	return nil
}

// runWorkflow posts an ad hoc workflow and returns its chain and parent run ids.
func (b *execBundle) runWorkflow(t *testing.T, yaml string, inputs map[string]any) (chainID, jobID string) {
	t.Helper()
	code, res := b.Do(http.MethodPost, "/api/v1/workflows/run", map[string]any{"workflow": yaml, "inputs": inputs})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	return res["chainId"].(string), res["jobId"].(string)
}

// TestCatalogueWorkflowRunsEndToEnd: workflows/content-pipeline.yaml, registered by the
// bootstrap, is dispatched by its job type like any skill; its jobs run as a DAG (the two
// in the middle in parallel), templates reach the steps' payloads, outputs flow through
// needs to the workflow's outputs, and bad inputs are a 400 naming the input.
func TestCatalogueWorkflowRunsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	code, sk := b.Do(http.MethodGet, "/api/v1/skills/content-pipeline", nil)
	require.Equal(t, http.StatusOK, code, "%v", sk)
	require.Equal(t, "chain", sk["execution_type"])
	src, err := os.ReadFile(filepath.Join(b.H.Root(), "workflows", "content-pipeline.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(src), sk["workflow"], "the file is kept as written")

	code, res := b.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": "content-pipeline", "payload": map[string]any{}})
	require.Equal(t, http.StatusBadRequest, code, "%v", res)
	require.Equal(t, "VALIDATION_FAILED", res["code"])
	require.Equal(t, "payload.source", res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)["field"])

	chainID, jobID := b.dispatchChain(t, "content-pipeline", map[string]any{"source": "Otters hold hands while they sleep."})
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "completed", c["status"], "%v", c)
	for _, job := range []string{"extract", "analyze", "summarize", "aggregate"} {
		j := jobOf(c, job)
		require.NotNil(t, j, "job %s in %v", job, c["workflow"])
		require.Equal(t, "success", j["result"], "job %s", job)
	}
	require.Equal(t, "extract/fetch-content", c["steps"].([]any)[0].(map[string]any)["stepId"])
	require.Equal(t, map[string]int{"extract/fetch-content": 1, "analyze/run-analysis": 1, "summarize/summary": 1,
		"aggregate/combine": 1}, b.stepRuns(t, chainID), "each step dispatched once")

	var prompt string
	ctx := context.Background()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT payload->>'prompt' FROM runs WHERE chain_id = $1 AND chain_step = 'extract/fetch-content'`,
		chainID).Scan(&prompt))
	require.Equal(t, "Extract the main content of source src-abc123, without commentary: Otters hold hands while they sleep.", prompt)
	var extracted string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT output->>'content' FROM runs WHERE chain_id = $1 AND chain_step = 'extract/fetch-content'`,
		chainID).Scan(&extracted))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT payload->>'prompt' FROM runs WHERE chain_id = $1 AND chain_step = 'summarize/summary'`,
		chainID).Scan(&prompt))
	require.Equal(t, "Summarise in three sentences: "+extracted, prompt, "needs.<job>.outputs reach the next job")

	r := b.WaitStatus(jobID, 10*time.Second, "completed")
	out := r["output"].(map[string]any)
	report := out["outputs"].(map[string]any)["report"]
	require.NotEmpty(t, report, "the workflow_call output: %v", out)
	var combined string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT output->>'content' FROM runs WHERE chain_id = $1 AND chain_step = 'aggregate/combine'`,
		chainID).Scan(&combined))
	require.Equal(t, combined, report)
}

// gateWorkflow: a job whose step needs a reviewer (critical skill) and may fail without
// failing the run, a matrix job beside it, and a job after both that runs whatever they
// did and says what they did.
const gateWorkflow = `name: Gate and fan
on:
  workflow_dispatch:
    inputs:
      topic:
        type: string
        required: true
jobs:
  gate:
    runs-on: any
    continue-on-error: true
    steps:
      - id: review
        uses: ./skills/w_crit
        with:
          prompt: "Approve ${{ inputs.topic }}?"
  fan:
    runs-on: any
    strategy:
      matrix:
        n: [1, 2]
    steps:
      - uses: ./skills/w_step
        with:
          prompt: "Part ${{ matrix.n }} of ${{ inputs.topic }}"
  after:
    runs-on: any
    needs: [gate, fan]
    if: ${{ always() }}
    steps:
      - id: report
        uses: ./skills/w_step
        with:
          prompt: "gate ${{ needs.gate.result }}, fan ${{ needs.fan.result }}"
`

func (b *execBundle) putWorkflowSkills(t *testing.T) {
	b.putSkill(t, skill.Skill{JobType: "w_step", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16,
		SystemPrompt: "Answer briefly."})
	b.putSkill(t, skill.Skill{JobType: "w_crit", ExecutionType: "llm_only", RoutingHint: "fast", MaxTokens: 16,
		RiskLevel: "critical"})
}

// TestAdHocWorkflowSemantics runs a workflow from its text: a held step rejected fails its
// job, whose continue-on-error makes it conclude success (its outcome failure) and keeps
// the run completed, a matrix fans out, and always() runs the join. Validation names line
// and column.
func TestAdHocWorkflowSemantics(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putWorkflowSkills(t)

	code, res := b.Do(http.MethodPost, "/api/v1/workflows/validate", map[string]any{"workflow": "name: x\non: workflow_dispatch\njobs:\n  a:\n    runs-on: any\n    steps:\n      - run: echo hi\n"})
	require.Equal(t, http.StatusBadRequest, code, "%v", res)
	f := res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)
	require.Equal(t, "shell-step", f["rule"], "%v", f)
	require.EqualValues(t, 7, f["line"])
	require.EqualValues(t, 9, f["column"])
	require.Contains(t, f["hint"], "uses: ./skills/")

	code, res = b.Do(http.MethodPost, "/api/v1/workflows/validate", map[string]any{"workflow": gateWorkflow})
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, []any{"gate", "fan", "after"}, res["jobs"])

	chainID, jobID := b.runWorkflow(t, gateWorkflow, map[string]any{"topic": "otters"})
	held := b.waitStep(t, chainID, "gate/review", time.Minute, "held_for_review")
	b.waitStep(t, chainID, "fan/1/1", time.Minute, "completed")
	code, res = b.Do(http.MethodPost, "/api/v1/dispatch/"+held["jobId"].(string)+"/reject", map[string]any{"reason": "not today"})
	require.Equal(t, http.StatusOK, code, "%v", res)

	c := b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "completed", c["status"], "a continue-on-error job does not fail the run: %v", c)
	require.Equal(t, "adhoc.gate-and-fan", c["jobType"])
	require.Equal(t, "success", jobOf(c, "gate")["result"], "continue-on-error: the job concludes success, as on GitHub")
	require.Equal(t, "failure", jobOf(c, "gate")["outcome"], "and its outcome tells the truth")
	require.Equal(t, "success", jobOf(c, "fan")["result"])
	require.EqualValues(t, 2, jobOf(c, "fan")["instances"])
	require.Equal(t, map[string]int{"gate/review": 1, "fan/0/1": 1, "fan/1/1": 1, "after/report": 1}, b.stepRuns(t, chainID))
	var prompt string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT payload->>'prompt' FROM runs WHERE chain_id = $1 AND chain_step = 'after/report'`, chainID).Scan(&prompt))
	require.Equal(t, "gate success, fan success", prompt)
	b.WaitStatus(jobID, 10*time.Second, "completed")

	// Cancelling a workflow cancels what is in flight.
	chainID, jobID = b.runWorkflow(t, gateWorkflow, map[string]any{"topic": "cancel me"})
	b.waitStep(t, chainID, "gate/review", time.Minute, "held_for_review")
	code, res = b.Do(http.MethodPost, "/api/v1/chains/"+chainID+"/cancel", nil)
	require.Equal(t, http.StatusOK, code, "%v", res)
	c = b.chain(t, chainID)
	require.Equal(t, "cancelled", c["status"])
	require.Equal(t, "cancelled", step(c, "gate/review")["status"])
	require.Equal(t, "cancelled", step(c, "after/report")["status"])
	b.WaitStatus(jobID, 10*time.Second, "cancelled")
}

// TestWorkflowSurvivesDispatcherSIGKILL: the coordinator (in the dispatcher) is killed
// while a workflow runs; restarted, it finishes the workflow and no step runs twice.
func TestWorkflowSurvivesDispatcherSIGKILL(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--model", "sim-fast=latency=150ms"},
		ExtraEnv: []string{"SWITCHYARD_RECONCILE_EVERY=200ms", "SWITCHYARD_RECONCILE_GRACE=1s"}}})
	chainID, _ := b.dispatchChain(t, "content-pipeline", map[string]any{"source": "a long text"})
	b.waitStep(t, chainID, "extract/fetch-content", time.Minute, "queued", "running", "completed")
	b.kill(t, harness.Dispatcher, syscall.SIGKILL)
	b.startWith(t, harness.Dispatcher, nil)
	c := b.waitChain(t, chainID, 2*time.Minute, "completed", "failed")
	require.Equal(t, "completed", c["status"], "%v", c)
	require.Equal(t, map[string]int{"extract/fetch-content": 1, "analyze/run-analysis": 1, "summarize/summary": 1,
		"aggregate/combine": 1}, b.stepRuns(t, chainID))
}

// rulesWorkflow: a matrix whose first instance needs a reviewer, one instance at a time,
// fail-fast; a job after it with the default if, and one with if: failure().
const rulesWorkflow = `name: rules
on: workflow_dispatch
jobs:
  fan:
    runs-on: any
    strategy:
      max-parallel: 1
      matrix:
        n: [0, 1, 2]
    steps:
      - id: review
        if: matrix.n == 0
        uses: ./skills/w_crit
        with:
          prompt: "Approve part ${{ matrix.n }}?"
      - uses: ./skills/w_step
        with:
          prompt: "Part ${{ matrix.n }}"
  deploy:
    runs-on: any
    needs: fan
    steps:
      - uses: ./skills/w_step
        with:
          prompt: deploy
  notify:
    runs-on: any
    needs: fan
    if: failure()
    steps:
      - uses: ./skills/w_step
        with:
          prompt: "fan ${{ needs.fan.result }}"
`

// TestWorkflowFailFastAndFailureBranch: max-parallel holds the other instances back while
// the first waits for its reviewer; rejected, it fails, fail-fast cancels the others
// before they start, the dependent job is skipped and the failure() branch runs.
func TestWorkflowFailFastAndFailureBranch(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.putWorkflowSkills(t)
	chainID, jobID := b.runWorkflow(t, rulesWorkflow, nil)
	held := b.waitStep(t, chainID, "fan/0/review", time.Minute, "held_for_review")
	c := b.chain(t, chainID)
	require.Equal(t, "pending", step(c, "fan/1/review")["status"], "max-parallel 1: the next instance waits")
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+held["jobId"].(string)+"/reject", map[string]any{"reason": "no"})
	require.Equal(t, http.StatusOK, code, "%v", res)

	c = b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "failed", c["status"], "%v", c)
	require.Equal(t, "WORKFLOW_FAILED", c["error"].(map[string]any)["code"])
	require.Equal(t, "skipped", step(c, "fan/0/2")["status"], "after the failed step")
	require.Equal(t, "cancelled", step(c, "fan/1/review")["status"], "fail-fast")
	require.Equal(t, "cancelled_by:fan/0/review", step(c, "fan/1/review")["reason"])
	require.Equal(t, "skipped", step(c, "fan/1/2")["status"])
	require.Equal(t, "cancelled", step(c, "fan/2/review")["status"])
	require.Equal(t, "failure", jobOf(c, "fan")["result"])
	require.Equal(t, "skipped", jobOf(c, "deploy")["result"])
	require.Equal(t, "job_if", step(c, "deploy/1")["reason"])
	require.Equal(t, "success", jobOf(c, "notify")["result"])
	require.Equal(t, map[string]int{"fan/0/review": 1, "notify/1": 1}, b.stepRuns(t, chainID), "nothing else ran")
	var prompt string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT payload->>'prompt' FROM runs WHERE chain_id = $1 AND chain_step = 'notify/1'`, chainID).Scan(&prompt))
	require.Equal(t, "fan failure", prompt)
	b.WaitStatus(jobID, 10*time.Second, "failed")
}

// slowWorkflow: a job out of its timeout-minutes, a job after it that runs always and
// says how it ended, and runs-on naming a queue class.
const slowWorkflow = `name: slow
on: workflow_dispatch
jobs:
  slow:
    runs-on: cpu
    timeout-minutes: 0.04
    steps:
      - id: think
        uses: ./skills/w_step
        with:
          prompt: think long
  after:
    runs-on: default
    needs: slow
    if: always()
    steps:
      - uses: ./skills/w_step
        with:
          prompt: "slow ${{ needs.slow.result }}"
`

// TestWorkflowTimeoutIsCancelled: a step that outlives its job's timeout-minutes is
// stopped by the executor; GitHub calls that job cancelled, and the workflow fails.
func TestWorkflowTimeoutIsCancelled(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{SimArgs: []string{"--default-latency", "constant:6s"}}})
	b.putWorkflowSkills(t)
	chainID, _ := b.runWorkflow(t, slowWorkflow, nil)
	c := b.waitChain(t, chainID, time.Minute, "completed", "failed", "cancelled", "timed_out")
	require.Equal(t, "failed", c["status"], "%v", c)
	require.Equal(t, "timed_out", step(c, "slow/think")["status"])
	require.Equal(t, "cancelled", jobOf(c, "slow")["result"])
	var prompt, queue string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT payload->>'prompt' FROM runs WHERE chain_id = $1 AND chain_step = 'after/1'`, chainID).Scan(&prompt))
	require.Equal(t, "slow cancelled", prompt)
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT queue FROM runs WHERE chain_id = $1 AND chain_step = 'slow/think'`, chainID).Scan(&queue))
	require.Equal(t, "default", queue, "runs-on cpu: the skill's own queue is of that class")
}

// TestCatalogueWorkflows runs the other examples of workflows/ end to end: the matrix
// fan-out with its join, the branch on a job's output (exactly one branch runs), and the
// optional check (no personal data: it runs, and publish after it).
func TestCatalogueWorkflows(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	run := func(jobType string, input map[string]any) map[string]any {
		t.Helper()
		chainID, _ := b.dispatchChain(t, jobType, input)
		c := b.waitChain(t, chainID, 2*time.Minute, "completed", "failed", "cancelled", "timed_out")
		require.Equal(t, "completed", c["status"], "%s: %v", jobType, c)
		return c
	}
	c := run("research-fan-out", map[string]any{"topic": "tidal power"})
	require.EqualValues(t, 3, jobOf(c, "analyse")["instances"])
	require.Equal(t, "success", jobOf(c, "brief")["result"])
	outs := jobOf(c, "analyse")["outputs"].(map[string]any)
	for _, angle := range []string{"market", "technology", "regulation"} {
		require.NotEmpty(t, outs[angle], "each instance's output survives the others' empty ones: %v", outs)
	}

	c = run("support-triage", map[string]any{"message": "My invoice is wrong."})
	ran := 0
	for _, job := range []string{"escalate", "reply"} {
		switch jobOf(c, job)["result"] {
		case "success":
			ran++
		case "skipped":
		default:
			t.Fatalf("%s: %v", job, jobOf(c, job))
		}
	}
	require.Equal(t, 1, ran, "exactly one branch runs: %v", c["workflow"])

	c = run("review-optional", map[string]any{"message": "Where is my parcel?"})
	for _, job := range []string{"draft", "check", "publish"} {
		require.Equal(t, "success", jobOf(c, job)["result"], job)
	}
}
