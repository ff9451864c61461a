package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// oneStep is the script of agent i (prefix "agent/<i>/"; 0: the execute pattern's keys):
// a plan of one llm_only step, its result, a pass, and an evaluation answering answer.
func oneStep(i int, answer string) map[string]openai.ChatCompletionMessage {
	p := ""
	if i > 0 {
		p = fmt.Sprintf("agent/%d/", i)
	}
	b, _ := json.Marshal(map[string]any{"goal_achieved": true, "reasoning": fmt.Sprintf("agent %d is done", i), "answer": answer})
	return map[string]openai.ChatCompletionMessage{
		p + "plan/1/try/1":    planMsg(st{id: "s1", typ: "llm_only"}),
		p + "exec/1/llm":      text("s1 result"),
		p + "reflect/1/try/1": verdict("pass", "s1 is written"),
		p + "eval/try/1":      text(string(b)),
	}
}

func scriptOf(parts ...map[string]openai.ChatCompletionMessage) map[string]openai.ChatCompletionMessage {
	all := map[string]openai.ChatCompletionMessage{}
	for _, p := range parts {
		maps.Copy(all, p)
	}
	return all
}

func jsonMsg(v any) openai.ChatCompletionMessage {
	b, _ := json.Marshal(v)
	return text(string(b))
}

// spanAttrs lists attribute k of the spans of type typ, in the order they were made.
func (e *agentEnv) spanAttrs(typ span.Type, k string) []any {
	var out []any
	for _, s := range e.spans {
		if s.Type == typ {
			out = append(out, s.Attributes[k])
		}
	}
	return out
}

func sortedAsked(j *journal) []string {
	keys := slices.Collect(maps.Keys(j.asked))
	slices.Sort(keys)
	return keys
}

func TestPatternCompete(t *testing.T) {
	t.Parallel()
	j := newJournal()
	env, job := agentSetup(j, `{"agent_pattern":"compete","prompts":["be brief","be thorough"]}`, scriptOf(
		oneStep(1, "Paris"), oneStep(2, "Paris, France"), oneStep(3, "Lyon"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 2, "reasoning": "2 is precise"})}))
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, out.Status)
	require.Equal(t, "Paris, France", out.Output["content"])
	require.Equal(t, 2, out.Output["chosen"])
	require.Equal(t, "2 is precise", out.Output["judge_reasoning"])
	require.Equal(t, "compete", out.Output["pattern"])
	agents := out.Output["agents"].([]agentRun)
	require.Len(t, agents, 3)
	require.Equal(t, "Lyon", agents[2].Content)
	require.True(t, agents[0].GoalAchieved)
	require.Len(t, j.asked, 13, "4 calls per agent and the judge")
	for _, n := range j.asked {
		require.Equal(t, 1, n)
	}
	// The prompt variations are cycled over the agents; the judge reads every answer.
	require.Contains(t, env.requests["agent/1/plan/1/try/1"].Messages[0].Content, "be brief")
	require.Contains(t, env.requests["agent/2/exec/1/llm"].Messages[0].Content, "be thorough")
	require.Contains(t, env.requests["agent/3/exec/1/llm"].Messages[0].Content, "be brief")
	require.Contains(t, env.requests["judge/try/1"].Messages[1].Content, "Agent 3 (its own evaluation: goal achieved true):\nLyon")
	require.Contains(t, env.requests["judge/try/1"].Messages[1].Content, "[call:judge]")

	require.ElementsMatch(t, []any{1, 2, 3}, env.spanAttrs(span.Agent, "agent"))
	require.Equal(t, []any{"agent", "agent", "agent"}, env.spanAttrs(span.Agent, "role"))
	require.Equal(t, []any{2}, env.spanAttrs(span.Judge, "chosen"))
	// Each agent's phases hang under its agent span.
	parents := map[string]bool{}
	for _, s := range env.spans {
		if s.Type == span.Agent {
			require.Equal(t, "root", s.ParentID)
			parents[s.ID] = true
		}
		if s.Type == span.GoalDecompose {
			require.True(t, parents[s.ParentID], "a plan's span is under its agent's")
		}
	}
	var tagged []any
	for _, e := range env.eventsOf["job:plan_created"] {
		tagged = append(tagged, e["agent"])
	}
	require.ElementsMatch(t, []any{1.0, 2.0, 3.0}, tagged, "each agent's events name it")
	require.Equal(t, "judge", env.eventsOf["job:thinking"][len(env.eventsOf["job:thinking"])-1]["phase"])
}

func TestPatternSelfConsistent(t *testing.T) {
	t.Parallel()
	t.Run("a majority needs no judge", func(t *testing.T) {
		t.Parallel()
		j := newJournal()
		env, job := agentSetup(j, `{"agent_pattern":"self_consistent"}`, scriptOf(
			oneStep(1, "Lyon"), oneStep(2, " Paris."), oneStep(3, "paris")))
		out, err := Autonomous(context.Background(), env, job)
		require.NoError(t, err)
		require.Equal(t, " Paris.", out.Output["content"])
		require.Equal(t, 2, out.Output["chosen"])
		require.Equal(t, "majority vote: 2 of 3 agents gave this answer", out.Output["judge_reasoning"])
		require.NotContains(t, j.asked, "judge/try/1")
		require.Equal(t, []any{map[string][]int{"lyon": {1}, "paris": {2, 3}}}, env.spanAttrs(span.Judge, "votes"))
		require.Equal(t, []any{false}, env.spanAttrs(span.Judge, "tie"))
		// The default temperatures spread from 0.2 to 1.0, one per agent.
		temps := map[float32]bool{}
		for i := 1; i <= 3; i++ {
			temps[env.requests[fmt.Sprintf("agent/%d/plan/1/try/1", i)].Temperature] = true
		}
		require.Equal(t, map[float32]bool{0.2: true, 0.6: true, 1.0: true}, temps)
		require.ElementsMatch(t, []any{0.2, 0.6, 1.0}, env.spanAttrs(span.Agent, "temperature"))
	})
	t.Run("a tie goes to the judge", func(t *testing.T) {
		t.Parallel()
		j := newJournal()
		env, job := agentSetup(j, `{"agent_pattern":"self_consistent","agents":2,"temperatures":[0,1]}`, scriptOf(
			oneStep(1, "Lyon"), oneStep(2, "Paris"),
			map[string]openai.ChatCompletionMessage{
				"judge/try/1": jsonMsg(map[string]any{"chosen": 7, "reasoning": "?"}),
				"judge/try/2": jsonMsg(map[string]any{"chosen": 1, "reasoning": "Lyon is right"}),
			}))
		out, err := Autonomous(context.Background(), env, job)
		require.NoError(t, err)
		require.Equal(t, "Lyon", out.Output["content"])
		require.Contains(t, env.requests["judge/try/2"].Messages[3].Content, "chosen must be one of [1 2], not 7")
		require.Equal(t, []any{true}, env.spanAttrs(span.Judge, "tie"))
		require.Equal(t, []any{1}, env.spanAttrs(span.Judge, "chosen"))
	})
}

func TestPatternCritic(t *testing.T) {
	t.Parallel()
	j := newJournal()
	env, job := agentSetup(j, `{"agent_pattern":"critic","rounds":3,"critic_prompt":"Be harsh."}`, scriptOf(
		oneStep(1, "draft one"),
		map[string]openai.ChatCompletionMessage{"agent/2/critique/try/1": jsonMsg(map[string]any{"approved": false, "critique": "too vague"})},
		oneStep(3, "draft two"),
		map[string]openai.ChatCompletionMessage{"agent/4/critique/try/1": jsonMsg(map[string]any{"approved": true, "critique": "good now"})}))
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, out.Status)
	require.Equal(t, "draft two", out.Output["content"])
	require.Equal(t, 3, out.Output["chosen"])
	require.Equal(t, "good now", out.Output["judge_reasoning"])
	require.Equal(t, []any{"generator", "critic", "reviser", "critic"}, env.spanAttrs(span.Agent, "role"))
	require.Equal(t, []any{nil, 1, 1, 2}, env.spanAttrs(span.Agent, "round"))
	require.Equal(t, "Be harsh.", env.requests["agent/2/critique/try/1"].Messages[0].Content)
	require.Contains(t, env.requests["agent/2/critique/try/1"].Messages[1].Content, "draft one")
	// The reviser's goal holds the draft and the critique; round 3 never starts.
	goal := env.requests["agent/3/plan/1/try/1"].Messages[1].Content
	require.Contains(t, goal, "A draft answer to this goal:\ndraft one")
	require.Contains(t, goal, "A critic's critique of the draft:\ntoo vague")
	require.NotContains(t, j.asked, "agent/5/plan/1/try/1")
}

func TestPatternCollaborate(t *testing.T) {
	t.Parallel()
	j := newJournal()
	block := `{"agent_pattern":"collaborate","coordinator_prompt":"Merge.","specialists":[
		{"role":"researcher","prompt":"Find the facts.","tools":["a"]},{"role":"writer","prompt":"Write it up."}]}`
	env, job := agentSetup(j, block, scriptOf(oneStep(1, "facts"), oneStep(2, "prose"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"reasoning": "facts in prose", "answer": "merged"})}))
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, "merged", out.Output["content"])
	require.NotContains(t, out.Output, "chosen")
	require.Equal(t, "facts in prose", out.Output["judge_reasoning"])
	require.Equal(t, []any{"researcher", "writer"}, sortedAny(env.spanAttrs(span.Agent, "role")))
	// Each specialist plans with its own tools and instructions.
	require.Contains(t, env.requests["agent/1/plan/1/try/1"].Messages[1].Content, "- a: tool a")
	require.NotContains(t, env.requests["agent/1/plan/1/try/1"].Messages[1].Content, "- b: tool b")
	require.Contains(t, env.requests["agent/2/plan/1/try/1"].Messages[1].Content, "No tools are available")
	require.Contains(t, env.requests["agent/2/plan/1/try/1"].Messages[0].Content, "Your role in the team: writer.\nWrite it up.")
	require.Equal(t, "Merge.", env.requests["judge/try/1"].Messages[0].Content)
	require.Contains(t, env.requests["judge/try/1"].Messages[1].Content, "1. researcher:\nfacts")
	require.Equal(t, []any{nil}, env.spanAttrs(span.Judge, "chosen"))
}

func sortedAny(xs []any) []any {
	slices.SortFunc(xs, func(a, b any) int {
		if fmt.Sprint(a) < fmt.Sprint(b) {
			return -1
		}
		return 1
	})
	return xs
}

// TestPatternApprovalPausesTheRun: two of three compete agents reach the gate; the third
// runs to its end; the run pauses with both held calls. The review decides both: approved,
// each call is made; rejected, each agent gets the reason. Either way the agent that had
// finished asks nothing again, and the judge is asked once.
func TestPatternApprovalPausesTheRun(t *testing.T) {
	t.Parallel()
	gated := func(i int) map[string]openai.ChatCompletionMessage {
		p := fmt.Sprintf("agent/%d/", i)
		return map[string]openai.ChatCompletionMessage{
			p + "plan/1/try/1":      planMsg(st{id: "s1", typ: "tool_using", tools: []string{"b"}}),
			p + "exec/1/iter/1/llm": callMsg(fmt.Sprintf("c%d", i), "b"),
			p + "exec/1/iter/2/llm": text("used b"),
			p + "reflect/1/try/1":   verdict("pass", "ok"),
			p + "eval/try/1":        evalMsg(true),
		}
	}
	script := scriptOf(gated(1), gated(2), oneStep(3, "no tools needed"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 3, "reasoning": "3"})})
	block := `{"agent_pattern":"compete","require_approval_for":["b"]}`
	for _, tc := range []struct {
		review Review
		result string
	}{
		{Review{Decision: Approved}, `b says {"q":"c1"}`},
		{Review{Decision: Rejected, Reason: "no"}, "error: a reviewer rejected this call and it was not made; find another way. The reviewer's reason: no"},
	} {
		t.Run(string(tc.review.Decision), func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			env, job := agentSetup(j, block, script)
			out, err := Autonomous(context.Background(), env, job)
			require.NoError(t, err)
			require.Equal(t, run.PendingReview, out.Status)
			require.ElementsMatch(t, []string{"c1", "c2"}, []string{out.Held[0].CallID, out.Held[1].CallID})
			require.ElementsMatch(t, []int{1, 2}, out.Output["agents_paused"])
			require.Contains(t, j.asked, "agent/3/eval/try/1", "the agent without a gate ran to its end")
			require.NotContains(t, j.asked, "judge/try/1")
			before := len(j.order)

			env, job = agentSetup(j, block, script)
			env.reviews["agent/1/exec/1/iter/1/approval"] = tc.review
			env.reviews["agent/2/exec/1/iter/1/approval"] = tc.review
			out, err = Autonomous(context.Background(), env, job)
			require.NoError(t, err)
			require.Equal(t, run.Completed, out.Status)
			require.Equal(t, "no tools needed", out.Output["content"])
			msgs := env.requests["agent/1/exec/1/iter/2/llm"].Messages
			require.Equal(t, tc.result, msgs[len(msgs)-1].Content)
			for k, n := range j.asked {
				require.Equal(t, 1, n, k)
			}
			for _, k := range j.order[before:] {
				require.NotRegexp(t, `^agent/3/`, k, "the finished agent replays")
			}
			// The resumed attempt announces only what it was answered anew.
			for _, e := range env.eventsOf["job:plan_created"] {
				t.Fatalf("a replayed plan was announced again: %v", e)
			}
			require.Len(t, env.eventsOf["job:reflection"], 2, "agents 1 and 2 reflect anew; agent 3's is replayed")
		})
	}
}

// TestPatternResumesWithoutAskingTwice crashes a compete run after each journal entry and
// resumes it: the outcome is the uninterrupted run's, and every call was asked once.
func TestPatternResumesWithoutAskingTwice(t *testing.T) {
	t.Parallel()
	script := scriptOf(oneStep(1, "A"), oneStep(2, "B"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 1, "reasoning": "A"})})
	block := `{"agent_pattern":"compete","agents":2}`
	ref := newJournal()
	env, job := agentSetup(ref, block, script)
	want, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Len(t, ref.asked, 9)
	for crash := 1; crash < 9; crash++ {
		t.Run(fmt.Sprintf("crash after entry %d", crash), func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			j.crashAt = crash
			var out Outcome
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				env, job := agentSetup(j, block, script)
				out, err = Autonomous(context.Background(), env, job)
				if !errors.Is(err, errCrash) {
					break
				}
			}
			require.NoError(t, err)
			require.Equal(t, want, out)
			require.Equal(t, sortedAsked(ref), sortedAsked(j))
			for k, n := range j.asked {
				require.Equal(t, 1, n, "%s asked again", k)
			}
		})
	}
}

// TestPatternEstimateRefusesUpFront: a pattern whose worst case cannot fit the run's
// ceiling is refused before any call, with the figures.
func TestPatternEstimateRefusesUpFront(t *testing.T) {
	t.Parallel()
	j := newJournal()
	env, job := agentSetup(j, `{"agent_pattern":"compete","agents":4}`, scriptOf(oneStep(1, "A")))
	job.Skill.MaxTokens = 1000
	ceiling := 0.05
	job.CostCeilingUSD = &ceiling
	_, err := Autonomous(context.Background(), env, job)
	var pe *PermanentError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "COST_ESTIMATE_EXCEEDS_CEILING", pe.Code)
	require.Empty(t, j.asked)
	require.Equal(t, 17, pe.Context["calls"])
	require.Equal(t, 0.05, pe.Context["ceiling_usd"])
	// 16 agent calls of (1,008 prompt tokens × 2.5 + 1,000 × 10) / 1e6, and the judge reading 4 answers.
	require.InDelta(t, 16*(1008*2.5+10000)/1e6+(5008*2.5+10000)/1e6, pe.Context["estimate_usd"], 1e-6)
	require.NotEmpty(t, pe.Troubleshooting)

	// A ceiling that fits, and the execute pattern whatever the ceiling, are not refused here.
	ceiling = 1
	env, job = agentSetup(newJournal(), `{"agent_pattern":"compete","agents":2}`, scriptOf(oneStep(1, "A"), oneStep(2, "A"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 1, "reasoning": "A"})}))
	job.CostCeilingUSD = &ceiling
	_, err = Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	tiny := 0.0001
	env, job = agentSetup(newJournal(), "", oneStep(0, "A"))
	job.CostCeilingUSD = &tiny
	_, err = Autonomous(context.Background(), env, job)
	require.NoError(t, err)
}

// TestReplayedAnswersAreNotAnnouncedAgain: a resumed execute run replays its plan and
// reflection; their job:plan_created, job:reflection and job:thinking were the first
// attempt's and are not emitted again.
func TestReplayedAnswersAreNotAnnouncedAgain(t *testing.T) {
	t.Parallel()
	j := newJournal()
	env, job := agentSetup(j, `{"require_approval_for":["b"]}`, approvalScript())
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.PendingReview, out.Status)
	require.Equal(t, []string{"job:plan_created", "job:progress"}, env.events)

	env, job = agentSetup(j, `{"require_approval_for":["b"]}`, approvalScript())
	env.reviews["exec/1/iter/2/approval"] = Review{Decision: Approved}
	out, err = Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, out.Status)
	require.Equal(t, []string{"job:progress", "job:progress", "job:reflection", "job:thinking", "job:thinking"}, env.events)
}
