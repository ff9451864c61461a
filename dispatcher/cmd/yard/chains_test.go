package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
)

// chainSkill binds test_chain: plan, then a and b, then synth. The in-process dispatcher
// has no executor, so its chains run until cancelled.
func (b *bundle) chainSkill() string {
	b.t.Helper()
	_, _, err := b.api.Skills.Put(context.Background(), client.SkillSpec{JobType: "test_chain", Enabled: true,
		ExecutionType: "chain", Chain: json.RawMessage(`{"steps": [
		{"step_id": "plan", "job_type": "demo_llm", "payload": {"prompt": "plan"}},
		{"step_id": "a", "job_type": "demo_llm", "depends_on": ["plan"], "payload": {"prompt": "a"}},
		{"step_id": "b", "job_type": "demo_llm", "depends_on": ["plan"], "payload": {"prompt": "b"}},
		{"step_id": "synth", "job_type": "demo_llm", "depends_on": ["a", "b"], "payload": {"prompt": "s"}}]}`)})
	require.NoError(b.t, err)
	return "test_chain"
}

func TestChainRunStatusCancelWatchRerun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	jobType := b.chainSkill()

	res := b.dispatchJSON(jobType, "--payload", `{"topic":"tides"}`)
	require.NotEmpty(t, res.ChainID, "dispatch names the chain of a chain skill")
	r := b.yard("", "chain", "run", jobType, "--payload", `{"topic":"tides"}`, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var run client.DispatchResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
	require.NotEmpty(t, run.ChainID)
	r = b.yard("", "chain", "run", jobType, "--prompt", "x")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "chain")

	// A job type that is not a chain is refused before anything is dispatched. (The chains
	// above add runs of their own meanwhile, as the coordinator starts them.)
	jobs := func() int {
		page, err := b.api.List(ctx, client.ListOptions{Limit: 200})
		require.NoError(t, err)
		n := 0
		for _, j := range page.Items {
			if j.ChainID == "" {
				n++
			}
		}
		return n
	}
	before := jobs()
	r = b.yard("", "chain", "run", "demo_llm", "--prompt", "x")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "not a chain")
	require.Equal(t, before, jobs(), "nothing was dispatched")
	r = b.yard("", "chain", "run", jobType)
	require.Equal(t, exitUsage, r.code, "the payload is required")

	// The coordinator starts the chain after the dispatch's answer: wait for its root.
	require.Eventually(t, func() bool {
		ch, err := b.api.Chain(ctx, run.ChainID)
		require.NoError(t, err)
		return ch.Steps[0].JobID != ""
	}, 10*time.Second, 10*time.Millisecond, "the chain's root was never dispatched")
	r = b.yard("", "chain", "status", run.ChainID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, run.ChainID)
	require.Contains(t, r.stdout, "STEP")
	require.Regexp(t, `(?m)^plan\s+-\s+queued\s+1\s+\$0\.000000\s+\S+…\s+[0-9a-f-]{36}$`, r.stdout)
	require.Regexp(t, `(?m)^synth\s+-\s+pending\s+0\s+\$0\.000000\s+-\s+-$`, r.stdout)
	r = b.yard("", "chain", "status", run.ChainID, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var ch client.Chain
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ch), r.stdout)
	require.Equal(t, run.JobID, ch.JobID)
	require.Len(t, ch.Steps, 4)

	r = b.yard("", "chain", "list", "--job-type", jobType, "--status", "running")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, run.ChainID)
	require.Contains(t, r.stdout, res.ChainID)

	r = b.yard("", "chain", "rerun", run.ChainID)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "CHAIN_NOT_FINISHED (409)")

	r = b.yard("", "chain", "cancel", run.ChainID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, run.ChainID+" cancelled\n", r.stdout)
	r = b.yard("", "chain", "cancel", run.ChainID)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "CHAIN_ALREADY_FINISHED (409)")

	// watch replays the chain to its end; a cancelled chain is exit 1.
	r = b.yard("", "chain", "watch", run.ChainID)
	require.Equal(t, exitError, r.code)
	require.Regexp(t, `(?m)plan\s+queued\s+attempt 1, job `, r.stdout)
	require.Regexp(t, `(?m)synth\s+cancelled`, r.stdout)
	require.Regexp(t, `(?m)chain\s+cancelled`, r.stdout)
	require.Contains(t, r.stdout, "chain "+run.ChainID+" cancelled")
	require.Contains(t, r.stderr, "ended: cancelled")
	r = b.yard("", "chain", "watch", run.ChainID, "-o", "json")
	require.Equal(t, exitError, r.code)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last client.Event
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "job:cancelled", last.Type)
	require.Equal(t, run.JobID, last.JobID)

	r = b.yard("", "chain", "rerun", run.ChainID, "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var ctl client.ChainControl
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ctl), r.stdout)
	require.Equal(t, run.ChainID, ctl.RerunOf)
	require.NotEqual(t, run.ChainID, ctl.ChainID)
	r = b.yard("", "chain", "status", ctl.ChainID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "rerun of")

	r = b.yard("", "chain", "status", "6f1c2d9e-0000-4000-8000-000000000000")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "CHAIN_NOT_FOUND (404)")
}

// TestChainStatusTable needs no dispatcher: the steps' table of chain status.
func TestChainStatusTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 10, 0, 10, 0, time.UTC)
	at := func(s int) *time.Time { v := now.Add(time.Duration(s) * time.Second); return &v }
	zero, one, three := 0, 1, 3
	ceiling := 0.5
	ch := &client.Chain{ChainID: "c1", JobID: "j0", JobType: "demo_research", Status: client.ChainRunning,
		Progress: 0.25, CostUSD: 0.000032, CostCeilingUSD: &ceiling, OnFailure: "abort", RerunOf: "c0",
		CreatedAt: *at(-10), Steps: []client.ChainStep{
			{StepID: "plan", JobID: "j1", JobType: "demo_llm", Status: "completed", Attempt: 1, Reused: true,
				StartedAt: at(-9), FinishedAt: at(-7), CostUSD: 0.000012},
			{StepID: "analyse", Instance: &zero, Instances: &three, JobID: "j2", Status: "failed", Attempt: 2,
				StartedAt: at(-6), FinishedAt: at(-5), CostUSD: 0.00002,
				Error: json.RawMessage(`{"code":"EXECUTION_ERROR","message":"boom"}`)},
			{StepID: "analyse", Instance: &one, Instances: &three, JobID: "j3", Status: "running", Attempt: 1,
				StartedAt: at(-2)},
			{StepID: "check", Status: "skipped", Reason: "condition"},
			{StepID: "synth", Status: client.StepPending, DependsOn: []string{"analyse"}},
		}}
	var out bytes.Buffer
	a := &app{out: &out}
	a.printChain(ch, now)
	require.Contains(t, out.String(), "cost        $0.000032 of $0.500000 ceiling\n")
	require.Contains(t, out.String(), "rerun of    c0\n")
	require.Contains(t, out.String(), `STEP     INSTANCE  STATUS               ATTEMPT  COST       DURATION  JOB
plan     -         completed (reused)   1        $0.000012  2s        j1
analyse  0 of 3    failed               2        $0.000020  1s        j2
analyse  1 of 3    running              1        $0.000000  2s…       j3
check    -         skipped (condition)  0        $0.000000  -         -
synth    -         pending              0        $0.000000  -         -
analyse[0] error: {"code":"EXECUTION_ERROR","message":"boom"}
`)
}

// TestChainWatchLines needs no dispatcher: which events make a line and what it says.
func TestChainWatchLines(t *testing.T) {
	t.Parallel()
	steps := map[string]string{}
	ev := func(typ, job, data string) client.Event {
		return client.Event{Type: typ, JobID: job, Data: json.RawMessage(data)}
	}
	type line struct{ subject, what, detail string }
	for _, tc := range []struct {
		e    client.Event
		want *line
	}{
		{ev("chain:step_dispatched", "p", `{"chainId":"c","stepId":"an","instance":1,"jobId":"r1","status":"held_for_review","attempt":2}`),
			&line{"an[1]", "held_for_review", "attempt 2, job r1"}},
		{ev("job:started", "r1", `{}`), &line{"an[1]", "running", ""}},
		{ev("job:span", "r1", `{}`), nil},
		{ev("job:completed", "r1", `{}`), nil},
		{ev("job:started", "r9", `{}`), &line{"job r9", "running", ""}},
		{ev("chain:step_ended", "p", `{"chainId":"c","stepId":"an","instance":1,"jobId":"r1","status":"failed","costUsd":0.5,
			"error":{"code":"EXECUTION_ERROR","message":"boom"}}`), &line{"an[1]", "failed", "$0.500000 EXECUTION_ERROR: boom"}},
		{ev("chain:step_ended", "p", `{"chainId":"c","stepId":"s","status":"skipped","costUsd":0,"reason":"condition"}`),
			&line{"s", "skipped", "$0.000000 condition"}},
		{ev("chain:fork", "p", `{"chainId":"c","trigger":"plan","forked":["a","b"]}`), &line{"plan", "fork", "→ a, b"}},
		{ev("chain:join", "p", `{"chainId":"c","joinStepId":"s","completedPredecessors":["a","b"]}`), &line{"s", "join", "← a, b"}},
		{ev("chain:progress", "p", `{"chainId":"c","progress":0.5,"completed":2,"total":4,"costUsd":0.25}`),
			&line{"chain", "progress", "50% (2 of 4 steps), $0.250000"}},
		{ev("job:queued", "p", `{}`), nil},
		{ev("job:failed", "p", `{}`), &line{"chain", "failed", ""}},
	} {
		subject, what, detail, ok := chainLine(tc.e, "p", steps)
		if tc.want == nil {
			require.False(t, ok, "%s of %s", tc.e.Type, tc.e.JobID)
			continue
		}
		require.True(t, ok, "%s of %s", tc.e.Type, tc.e.JobID)
		require.Equal(t, *tc.want, line{subject, what, strings.TrimSpace(detail)}, "%s of %s", tc.e.Type, tc.e.JobID)
	}
}
