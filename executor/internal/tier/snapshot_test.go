package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// snapshots is what survives a crash of the fake executor beside its journal: the newest
// snapshot of each key, as the run store keeps them.
type snapshots struct {
	mu    sync.Mutex
	seq   map[string]int
	state map[string]json.RawMessage
	saved int
}

func newSnapshots() *snapshots {
	return &snapshots{seq: map[string]int{}, state: map[string]json.RawMessage{}}
}

// snapEnv is an agentEnv that keeps snapshots, and counts the calls an attempt makes
// (fresh or replayed from the journal: in the runner each replayed one is a journal read)
// and the requests of the fresh ones.
type snapEnv struct {
	*agentEnv
	s *snapshots

	cmu   sync.Mutex // the agents of a pattern call at once
	calls int
	fresh map[string]openai.ChatCompletionRequest
}

func (e *snapEnv) LoadSnapshot(_ context.Context, key string) (int, json.RawMessage, bool, error) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	raw, ok := e.s.state[key]
	return e.s.seq[key], raw, ok, nil
}

func (e *snapEnv) SaveSnapshot(_ context.Context, key string, seq int, state json.RawMessage) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if _, ok := e.s.state[key]; !ok || e.s.seq[key] < seq {
		e.s.seq[key], e.s.state[key] = seq, state
		e.s.saved++
	}
}

func (e *snapEnv) Chat(ctx context.Context, step, parent string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	e.j.mu.Lock()
	_, replayed := e.j.entries[step]
	e.j.mu.Unlock()
	e.cmu.Lock()
	e.calls++
	if !replayed {
		e.fresh[step] = req
	}
	e.cmu.Unlock()
	return e.agentEnv.Chat(ctx, step, parent, req)
}

func (e *snapEnv) CallTool(ctx context.Context, step, parent string, t tool.Tool, c openai.ToolCall) (string, error) {
	e.cmu.Lock()
	e.calls++
	e.cmu.Unlock()
	return e.agentEnv.CallTool(ctx, step, parent, t, c)
}

// resumeScript goes through every phase: a retried plan, a tool step, an adjustment, an
// approval, a replan and an evaluation.
func resumeScript() map[string]openai.ChatCompletionMessage {
	return map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":      text("not a plan"),
		"plan/1/try/2":      planMsg(st{id: "s1", typ: "tool_using", tools: []string{"a"}}, st{id: "s2", typ: "llm_only"}),
		"exec/1/iter/1/llm": callMsg("c1", "a"),
		"exec/1/iter/2/llm": text("s1 result"),
		"reflect/1/try/1":   verdict("adjust", "s3 instead", st{id: "s3", typ: "tool_using", tools: []string{"gated"}}),
		"exec/2/iter/1/llm": callMsg("c2", "gated"),
		"exec/2/iter/2/llm": text("s3 result"),
		"reflect/2/try/1":   verdict("replan", "start over"),
		"plan/2/try/1":      planMsg(st{id: "t1", typ: "llm_only"}, st{id: "t2", typ: "llm_only"}),
		"exec/3/llm":        text("t1 result"),
		"reflect/3/try/1":   verdict("pass", "t1 done"),
		"exec/4/llm":        text("t2 result"),
		"reflect/4/try/1":   verdict("pass", "t2 done"),
		"eval/try/1":        evalMsg(true),
	}
}

// snapRun runs the agent to its end on j and s, attempt after attempt (a crash or an
// approval pause ends an attempt), and returns the outcome, each attempt's calls, and the
// requests of the fresh calls.
func snapRun(t *testing.T, j *journal, s *snapshots) (Outcome, []int, map[string]openai.ChatCompletionRequest) {
	t.Helper()
	var calls []int
	fresh := map[string]openai.ChatCompletionRequest{}
	for attempt := 0; attempt < 6; attempt++ {
		base, job := agentSetup(j, "", resumeScript())
		base.reviews["exec/2/iter/1/approval"] = Review{Decision: Approved}
		env := &snapEnv{agentEnv: base, s: s, fresh: fresh}
		out, err := Autonomous(context.Background(), env, job)
		calls = append(calls, env.calls)
		if errors.Is(err, errCrash) {
			continue
		}
		require.NoError(t, err)
		if out.Status != run.PendingReview {
			return out, calls, fresh
		}
	}
	t.Fatal("the run did not end")
	return Outcome{}, nil, nil
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestAutonomousResumesFromSnapshot: a run killed after any journal entry and resumed from
// its newest snapshot walks the same path as an uninterrupted run — the same outcome, the
// same journal, every fresh call asked once with the very request the uninterrupted run
// sent (so the restored memory and plan are the replayed ones) — while the attempt that
// resumes it replays only the calls after the snapshot.
func TestAutonomousResumesFromSnapshot(t *testing.T) {
	t.Parallel()
	ref := newJournal()
	want, refCalls, refFresh := snapRun(t, ref, newSnapshots())
	require.Equal(t, run.Completed, want.Status)
	require.Equal(t, []int{7, 10}, refCalls, "paused at the gated call (7 calls), then resumed from the snapshot after step 1: 10 calls, not 16")
	entries := 0
	for _, n := range ref.asked {
		entries += n
	}
	require.Equal(t, 16, entries, "every LLM call of the script and both tool calls, each once")

	// The same run on an Env without snapshots replays everything on resume.
	plain := newJournal()
	env, job := agentSetup(plain, "", resumeScript())
	env.reviews["exec/2/iter/1/approval"] = Review{Decision: Approved}
	_, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	noSnap, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.JSONEq(t, jsonOf(t, noSnap), jsonOf(t, want), "snapshots change nothing of the outcome")

	for crash := 1; crash < entries; crash++ {
		t.Run(fmt.Sprintf("crash after entry %d", crash), func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			j.crashAt = crash
			out, calls, fresh := snapRun(t, j, newSnapshots())
			require.JSONEq(t, jsonOf(t, want), jsonOf(t, out))
			require.Equal(t, ref.order, j.order)
			for k, n := range j.asked {
				require.Equal(t, 1, n, "%s asked again", k)
			}
			require.Equal(t, len(refFresh), len(fresh))
			for k, req := range refFresh {
				require.Equal(t, req, fresh[k], "%s was asked with another request", k)
			}
			if crash == entries-1 {
				// Killed at the evaluation: the snapshot after step 4 leaves one call to make.
				require.Equal(t, 1, calls[len(calls)-1], "attempts' calls: %v", calls)
			}
		})
	}
}

// TestAutonomousIgnoresUnusableSnapshots: a snapshot of another format, of another skill
// version, inconsistent or not JSON at all is not used: the run replays its journal and
// ends as an uninterrupted one, asking nothing twice.
func TestAutonomousIgnoresUnusableSnapshots(t *testing.T) {
	t.Parallel()
	ref := newJournal()
	want, _, _ := snapRun(t, ref, newSnapshots())

	good := func() agentState {
		return agentState{Version: agentSnapshotVersion, Plans: 2, Replans: 1,
			Done: []doneStep{{N: 1, StepID: "s1"}, {N: 2, StepID: "s3"}, {N: 3, StepID: "t1"}, {N: 4, StepID: "t2"}}}
	}
	for name, raw := range map[string]string{
		"not json":      `{"v":1,`,
		"other format":  jsonOf(t, func() agentState { s := good(); s.Version = agentSnapshotVersion + 1; return s }()),
		"other skill":   jsonOf(t, func() agentState { s := good(); s.SkillVersion = 7; return s }()),
		"steps missing": jsonOf(t, func() agentState { s := good(); s.Done = s.Done[:2]; return s }()),
		"misnumbered":   jsonOf(t, func() agentState { s := good(); s.Done[1].N = 5; return s }()),
		"no plan":       jsonOf(t, func() agentState { s := good(); s.Plans = 0; return s }()),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			j.crashAt = 15 // killed at the evaluation
			s := newSnapshots()
			// The bad snapshot is the newest: the live run's own snapshots are older.
			s.seq["snapshot"], s.state["snapshot"] = 4, json.RawMessage(raw)
			out, calls, _ := snapRun(t, j, s)
			require.JSONEq(t, jsonOf(t, want), jsonOf(t, out))
			require.Equal(t, ref.order, j.order)
			for k, n := range j.asked {
				require.Equal(t, 1, n, "%s asked again", k)
			}
			require.Greater(t, calls[len(calls)-1], 10, "the resumed attempt replays the journal: %v", calls)
		})
	}
}

// TestPatternAgentsResumeFromTheirSnapshots: each agent of a pattern keeps its snapshot under
// its own prefix (agent/<i>/snapshot); a run killed at the judge resumes every agent from its
// snapshot — one call each, its evaluation replayed — and ends as the uninterrupted run.
func TestPatternAgentsResumeFromTheirSnapshots(t *testing.T) {
	t.Parallel()
	block := `{"agent_pattern":"compete","prompts":["be brief","be thorough"]}`
	script := scriptOf(oneStep(1, "Paris"), oneStep(2, "Paris, France"), oneStep(3, "Lyon"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 2, "reasoning": "2 is precise"})})
	attempt := func(j *journal, s *snapshots) (Outcome, int, error) {
		base, job := agentSetup(j, block, script)
		env := &snapEnv{agentEnv: base, s: s, fresh: map[string]openai.ChatCompletionRequest{}}
		out, err := Autonomous(context.Background(), env, job)
		return out, env.calls, err
	}
	want, _, err := attempt(newJournal(), newSnapshots())
	require.NoError(t, err)
	require.Equal(t, run.Completed, want.Status)

	j, s := newJournal(), newSnapshots()
	j.crashAt = 12 // every agent's four answers are journaled; the judge's write fails
	_, _, err = attempt(j, s)
	require.ErrorIs(t, err, errCrash)
	for i := 1; i <= 3; i++ {
		key := fmt.Sprintf("agent/%d/snapshot", i)
		require.Equal(t, 1, s.seq[key], key)
	}
	require.NotContains(t, s.state, "snapshot", "no agent writes the execute pattern's key")
	out, calls, err := attempt(j, s)
	require.NoError(t, err)
	require.JSONEq(t, jsonOf(t, want), jsonOf(t, out))
	require.Equal(t, 4, calls, "three evaluations replayed and the judge; replaying would make 13")
	for k, n := range j.asked {
		require.Equal(t, 1, n, "%s asked again", k)
	}
}
