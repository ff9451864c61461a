package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// journal is what survives a crash of the fake executor: the entries written under their
// step keys, and how often each LLM call or tool call was really made (not replayed).
type journal struct {
	mu      sync.Mutex
	entries map[string]any
	asked   map[string]int
	order   []string
	// written counts the fresh entries; the write after crashAt of them fails once, as a
	// process killed right after its journal write (0: never).
	written, crashAt int
	// announced counts the announcements the run's events hold, by "<type> <announces>".
	// An Env writes its events when it is about to make a fresh call (as the runner flushes
	// before every router and tool call) and when the test ends its attempt (flush).
	// loseEvents makes the crash kill the process before that write, so the events emitted
	// since the last fresh entry (the announcements of its answer) are lost; without it
	// the process dies after the write, during the call.
	announced  map[string]int
	loseEvents bool
}

func newJournal() *journal {
	return &journal{entries: map[string]any{}, asked: map[string]int{}, announced: map[string]int{}}
}

var errCrash = errors.New("crashed")

// agentEnv is an Env like the runner's in what matters to a tier: Chat and CallTool are
// journaled under their step and replayed from the journal; Approval pauses once and then
// answers with the review the test gave. The LLM's answers come from a script keyed by
// step, so a test states which call gets which answer.
type agentEnv struct {
	j       *journal
	script  map[string]openai.ChatCompletionMessage
	tools   []tool.Tool
	reviews map[string]Review

	recorder
	mu       sync.Mutex
	requests map[string]openai.ChatCompletionRequest
	// pending are the announcements emitted and not yet written (journal.announced).
	pending []string
}

// Event records the event, and keeps an announcement for the next write of the events.
func (e *agentEnv) Event(ctx context.Context, typ string, data any) {
	e.recorder.Event(ctx, typ, data)
	if !slices.Contains(AnnouncementTypes, typ) {
		return
	}
	m, _ := data.(map[string]any)
	step, _ := m["announces"].(string)
	e.mu.Lock()
	e.pending = append(e.pending, typ+" "+step)
	e.mu.Unlock()
}

// Announced implements Announcements from the announcements written.
func (e *agentEnv) Announced(_ context.Context, typ, step string) bool {
	e.j.mu.Lock()
	defer e.j.mu.Unlock()
	return e.j.announced[typ+" "+step] > 0
}

// flush writes the pending announcements; e.j.mu held.
func (e *agentEnv) flushLocked() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range e.pending {
		e.j.announced[k]++
	}
	e.pending = nil
}

// flush writes the pending announcements, as the runner does when an attempt ends.
func (e *agentEnv) flush() {
	e.j.mu.Lock()
	defer e.j.mu.Unlock()
	e.flushLocked()
}

func (e *agentEnv) write(step string, v any, fresh func() (any, error)) (any, error) {
	e.j.mu.Lock()
	defer e.j.mu.Unlock()
	if v, ok := e.j.entries[step]; ok {
		return v, nil
	}
	if e.j.crashAt > 0 && e.j.written == e.j.crashAt {
		e.j.crashAt = 0
		if !e.j.loseEvents {
			e.flushLocked()
		}
		return nil, errCrash
	}
	e.flushLocked()
	v, err := fresh()
	if err != nil {
		return nil, err
	}
	e.j.asked[step]++
	e.j.entries[step] = v
	e.j.order = append(e.j.order, step)
	e.j.written++
	return v, nil
}

func (e *agentEnv) Chat(_ context.Context, step, _ string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	e.mu.Lock()
	e.requests[step] = req
	e.mu.Unlock()
	e.j.mu.Lock()
	_, replayed := e.j.entries[step]
	e.j.mu.Unlock()
	v, err := e.write(step, nil, func() (any, error) {
		m, ok := e.script[step]
		if !ok {
			return nil, fmt.Errorf("script has no answer for %s", step)
		}
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	a := &routerclient.Answer{Replayed: replayed}
	a.Choices = []openai.ChatCompletionChoice{{Message: v.(openai.ChatCompletionMessage)}}
	return a, nil
}

func (e *agentEnv) CallTool(_ context.Context, step, _ string, t tool.Tool, c openai.ToolCall) (string, error) {
	v, err := e.write(step, nil, func() (any, error) { return t.Name + " says " + c.Function.Arguments, nil })
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (e *agentEnv) Approval(_ context.Context, step string, _ []Held) (Review, error) {
	e.j.mu.Lock()
	defer e.j.mu.Unlock()
	if v, ok := e.j.entries[step+"/decision"]; ok {
		return v.(Review), nil
	}
	if _, paused := e.j.entries[step]; !paused {
		e.j.entries[step] = "paused"
		e.j.order = append(e.j.order, step)
		return Review{Decision: Pending}, nil
	}
	rv, ok := e.reviews[step]
	if !ok {
		return Review{Decision: Pending}, nil
	}
	e.j.entries[step+"/decision"] = rv
	e.j.order = append(e.j.order, step+"/decision")
	return rv, nil
}

func (e *agentEnv) Tools(context.Context) ([]tool.Tool, error) { return e.tools, nil }
func (e *agentEnv) CheckCancel(context.Context) error          { return nil }

// spansOf lists "<step> <verdict>" of the spans of a type.
func (e *agentEnv) spansOf(typ span.Type) []string {
	var out []string
	for _, s := range e.spans {
		if s.Type == typ {
			out = append(out, strings.TrimSpace(fmt.Sprintf("%v %v", s.Attributes["step"], attrOr(s, "verdict"))))
		}
	}
	return out
}

func attrOr(s *span.Span, k string) any {
	if v, ok := s.Attributes[k]; ok {
		return v
	}
	return ""
}

// The answers of a script.

type st struct {
	id, typ string
	tools   []string
	deps    []string
}

func stepJSON(s st) map[string]any {
	return map[string]any{"step_id": s.id, "description": "do " + s.id, "execution_type": s.typ,
		"tools": s.tools, "success_criteria": []string{s.id + " done"}, "depends_on": s.deps}
}

func planMsg(steps ...st) openai.ChatCompletionMessage {
	ss := make([]map[string]any, len(steps))
	for i, s := range steps {
		ss[i] = stepJSON(s)
	}
	b, _ := json.Marshal(map[string]any{"steps": ss})
	return text(string(b))
}

func verdict(v, reasoning string, steps ...st) openai.ChatCompletionMessage {
	m := map[string]any{"verdict": v, "reasoning": reasoning, "summary": "summary: " + reasoning}
	if steps != nil {
		ss := make([]map[string]any, len(steps))
		for i, s := range steps {
			ss[i] = stepJSON(s)
		}
		m["steps"] = ss
	}
	b, _ := json.Marshal(m)
	return text(string(b))
}

func evalMsg(achieved bool) openai.ChatCompletionMessage {
	b, _ := json.Marshal(map[string]any{"goal_achieved": achieved, "reasoning": "judged", "answer": "the answer"})
	return text(string(b))
}

func callMsg(id, name string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: id,
		Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: `{"q":"` + id + `"}`}}}}
}

// agentSetup is a run of an autonomous skill with tools a, b (gated by the skill's block)
// and gated (gated wherever used).
func agentSetup(j *journal, block string, script map[string]openai.ChatCompletionMessage) (*agentEnv, Job) {
	env := &agentEnv{j: j, script: script, reviews: map[string]Review{}, requests: map[string]openai.ChatCompletionRequest{},
		tools: []tool.Tool{
			{Name: "a", Description: "tool a", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "b", Description: "tool b", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "gated", Description: "g", RequiresApproval: true, Parameters: json.RawMessage(`{"type":"object"}`)},
		}}
	job := Job{RunID: "run", JobType: "agent", RootSpanID: "root", Payload: json.RawMessage(`{"prompt":"reach the goal"}`),
		Skill: skill.Skill{ExecutionType: "autonomous", MaxIterations: 3, Tools: []string{"a", "b", "gated"},
			Autonomous: json.RawMessage(block)}}
	return env, job
}

// twoSteps is a plan of a tool_using step s1 (tool a, one call then an answer) and an
// llm_only step s2 after it.
func twoSteps(extra map[string]openai.ChatCompletionMessage) map[string]openai.ChatCompletionMessage {
	m := map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":      planMsg(st{id: "s1", typ: "tool_using", tools: []string{"a"}}, st{id: "s2", typ: "llm_only", deps: []string{"s1"}}),
		"exec/1/iter/1/llm": callMsg("c1", "a"),
		"exec/1/iter/2/llm": text("s1 result"),
		"reflect/1/try/1":   verdict("pass", "a returned what s1 needs"),
		"exec/2/llm":        text("s2 result"),
		"reflect/2/try/1":   verdict("pass", "s2 is written"),
		"eval/try/1":        evalMsg(true),
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestAutonomousVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		block  string
		script map[string]openai.ChatCompletionMessage
		status run.Status
		// asked are the steps that must have been asked (in this order), and nothing else.
		asked   []string
		code    string // a permanent failure's code
		check   func(t *testing.T, env *agentEnv, out Outcome)
		replans int
	}{{
		name: "every step passes", script: twoSteps(nil), status: run.Completed,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			require.Equal(t, true, out.Output["goal_achieved"])
			require.Equal(t, "the answer", out.Output["content"])
			require.Equal(t, 2, out.Output["steps_executed"])
			// The reflection is grounded in the step's tool results.
			require.Contains(t, env.requests["reflect/1/try/1"].Messages[1].Content, `a({"q":"c1"}) returned: a says {"q":"c1"}`)
			require.Equal(t, openai.ChatCompletionResponseFormatTypeJSONSchema, env.requests["reflect/1/try/1"].ResponseFormat.Type)
			require.Equal(t, "plan", env.requests["plan/1/try/1"].ResponseFormat.JSONSchema.Name)
			// Step 2 remembers what step 1 achieved; step 1's loop offered only its tool.
			require.Contains(t, env.requests["exec/2/llm"].Messages[1].Content, "summary: a returned what s1 needs")
			require.Len(t, env.requests["exec/1/iter/1/llm"].Tools, 1)
			require.Equal(t, []string{"reflect/1 pass", "reflect/2 pass"}, env.spansOf(span.Reflection))
			require.Equal(t, []string{"plan/1"}, env.spansOf(span.GoalDecompose))
			require.Equal(t, []string{"eval"}, env.spansOf(span.GoalEvaluate))
			require.Equal(t, []string{"exec/1", "exec/2"}, env.spansOf(span.ChainStep))
			require.Equal(t, []string{"job:plan_created", "job:progress", "job:reflection", "job:thinking",
				"job:reflection", "job:thinking", "job:thinking"}, env.events)
			require.Equal(t, map[string]any{"jobId": "run", "phase": "reflection", "agent_step": float64(1),
				"reasoning": "a returned what s1 needs", "announces": "reflect/1/try/1"}, env.eventsOf["job:thinking"][0])
		},
	}, {
		name: "adjust replaces the remaining steps",
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("adjust", "s2 is not needed, s3 is", st{id: "s3", typ: "llm_only", deps: []string{"s1"}}),
			"exec/2/llm":      text("s3 result"),
		}),
		status: run.Completed,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			require.Contains(t, env.requests["exec/2/llm"].Messages[1].Content, "Your step (s3)")
			require.Equal(t, []string{"adjust/1"}, env.spansOf(span.PlanAdjust))
			adj := env.eventsOf["job:plan_adjusted"][0]
			require.Equal(t, "adjust", adj["kind"])
			require.Equal(t, []any{"s2"}, adj["removed"])
			require.Equal(t, []any{"s3"}, adj["added"])
			require.Equal(t, "s3", out.Output["steps"].([]doneStep)[1].StepID)
		},
	}, {
		name: "replan decomposes again",
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("replan", "the goal was misread"),
			"plan/2/try/1":    planMsg(st{id: "t1", typ: "llm_only", deps: []string{"s1"}}),
			"exec/2/llm":      text("t1 result"),
		}),
		status: run.Completed, replans: 1,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "plan/2/try/1", "exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			replan := env.requests["plan/2/try/1"].Messages[1].Content
			require.Contains(t, replan, "The previous plan was abandoned: the goal was misread")
			require.Contains(t, replan, "summary: the goal was misread", "the new plan knows what is done")
			require.Equal(t, []string{"plan/1", "plan/2"}, env.spansOf(span.GoalDecompose))
			require.Equal(t, []string{"replan/1"}, env.spansOf(span.PlanAdjust))
			require.Equal(t, []string{"job:plan_created", "job:progress", "job:reflection", "job:thinking",
				"job:plan_created", "job:plan_adjusted", "job:reflection", "job:thinking", "job:thinking"}, env.events)
		},
	}, {
		name: "fail ends the run with the reasoning",
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("fail", "the data does not exist"),
		}),
		code:  "AGENT_STEP_FAILED",
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm", "reflect/1/try/1"},
	}, {
		name:  "max_replans stops a planning spiral",
		block: `{"max_replans":1}`,
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("replan", "wrong"),
			"plan/2/try/1":    planMsg(st{id: "t1", typ: "llm_only"}),
			"exec/2/llm":      text("t1 result"),
			"reflect/2/try/1": verdict("replan", "still wrong"),
			"eval/try/1":      evalMsg(false),
		}),
		status: run.CompletedBudgetExhausted, replans: 1,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "plan/2/try/1", "exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			require.Contains(t, out.Warnings[0], "max_replans (1) reached")
			require.Contains(t, env.requests["eval/try/1"].Messages[1].Content, "The agent stopped early")
		},
	}, {
		name:  "max_replans 0 allows none",
		block: `{"max_replans":0}`,
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("replan", "wrong"),
		}),
		status: run.CompletedBudgetExhausted,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "eval/try/1"},
	}, {
		name:  "max_steps bounds the executed steps",
		block: `{"max_steps":1}`, script: twoSteps(nil), status: run.CompletedBudgetExhausted,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			require.Equal(t, "the agent's budget is exhausted: max_steps (1) reached with 1 step(s) of the plan not executed", out.Warnings[0])
			require.Equal(t, []string{"s2"}, stepIDs(out.Output["remaining_steps"].([]planStep)))
			require.Equal(t, "judged", out.Output["evaluation"])
			require.Equal(t, 1, out.Output["steps_executed"])
		},
	}, {
		name: "a malformed plan is asked again, more strictly",
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"plan/1/try/1": text("Sure! First I will look things up."),
			"plan/1/try/2": planMsg(st{id: "s1", typ: "tool_using", tools: []string{"nope"}}),
			"plan/1/try/3": text("```json\n" + planMsg(st{id: "s2", typ: "llm_only", deps: []string{"s1"}}, st{id: "s1", typ: "llm_only"}).Content + "\n```"),
			"exec/1/llm":   text("s1 result"),
		}),
		status: run.Completed,
		asked: []string{"plan/1/try/1", "plan/1/try/2", "plan/1/try/3", "exec/1/llm", "reflect/1/try/1",
			"exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			retry := env.requests["plan/1/try/2"].Messages
			require.Len(t, retry, 4)
			require.Equal(t, "Sure! First I will look things up.", retry[2].Content)
			require.Contains(t, retry[3].Content, "not the JSON object asked for")
			require.Contains(t, retry[3].Content, `"step_id":"s1"`, "an example of the shape")
			require.Contains(t, env.requests["plan/1/try/3"].Messages[5].Content, `tool "nope" is not available`)
			// depends_on orders the steps: s1 first although the plan lists s2 first.
			require.Contains(t, env.requests["exec/1/llm"].Messages[1].Content, "Your step (s1)")
		},
	}, {
		name: "three malformed plans fail the run",
		script: map[string]openai.ChatCompletionMessage{
			"plan/1/try/1": text("no"),
			"plan/1/try/2": planMsg(),
			"plan/1/try/3": planMsg(st{id: "x", typ: "llm_only", deps: []string{"y"}}, st{id: "y", typ: "llm_only", deps: []string{"x"}}),
		},
		code:  "PLAN_PARSE_FAILED",
		asked: []string{"plan/1/try/1", "plan/1/try/2", "plan/1/try/3"},
	}, {
		name: "an adjustment must be a valid plan too",
		script: twoSteps(map[string]openai.ChatCompletionMessage{
			"reflect/1/try/1": verdict("adjust", "x", st{id: "s1", typ: "llm_only"}),
			"reflect/1/try/2": verdict("maybe", "x"),
			"reflect/1/try/3": verdict("pass", "fine after all"),
		}),
		status: run.Completed,
		asked: []string{"plan/1/try/1", "exec/1/iter/1/llm", "exec/1/iter/1/tool/c1", "exec/1/iter/2/llm",
			"reflect/1/try/1", "reflect/1/try/2", "reflect/1/try/3", "exec/2/llm", "reflect/2/try/1", "eval/try/1"},
		check: func(t *testing.T, env *agentEnv, out Outcome) {
			require.Contains(t, env.requests["reflect/1/try/2"].Messages[3].Content, "the id of a step already executed")
			require.Contains(t, env.requests["reflect/1/try/3"].Messages[5].Content, `verdict must be pass, adjust, replan or fail, not "maybe"`)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			env, job := agentSetup(j, tc.block, tc.script)
			out, err := Autonomous(context.Background(), env, job)
			require.Equal(t, tc.asked, j.order)
			if tc.code != "" {
				var pe *PermanentError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, tc.code, pe.Code)
				if tc.code == "AGENT_STEP_FAILED" {
					require.Equal(t, "AGENT_STEP_FAILED: step 1 (s1): the data does not exist", err.Error())
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.status, out.Status)
			require.Equal(t, tc.replans, out.Output["replans"])
			if tc.check != nil {
				tc.check(t, env, out)
			}
		})
	}
}

// approvalScript: step 1 calls a (free), then b (gated by require_approval_for), then answers.
func approvalScript() map[string]openai.ChatCompletionMessage {
	return map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":      planMsg(st{id: "s1", typ: "tool_using", tools: []string{"a", "b"}}),
		"exec/1/iter/1/llm": callMsg("c1", "a"),
		"exec/1/iter/2/llm": callMsg("c2", "b"),
		"exec/1/iter/3/llm": text("s1 result"),
		"reflect/1/try/1":   verdict("pass", "ok"),
		"eval/try/1":        evalMsg(true),
	}
}

func TestAutonomousApprovalGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		review Review
		// result is what the LLM is told the gated call returned.
		result string
		called bool
	}{
		{"approved: the call is made", Review{Decision: Approved}, `b says {"q":"c2"}`, true},
		{"rejected: the reason is the result", Review{Decision: Rejected, Reason: "use a instead"},
			"error: a reviewer rejected this call and it was not made; find another way. The reviewer's reason: use a instead", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			env, job := agentSetup(j, `{"require_approval_for":["b"]}`, approvalScript())
			out, err := Autonomous(context.Background(), env, job)
			require.NoError(t, err)
			require.Equal(t, run.PendingReview, out.Status)
			require.Equal(t, []Held{{Tool: "b", CallID: "c2", Arguments: json.RawMessage(`{"q":"c2"}`)}}, out.Held)
			require.NotContains(t, j.asked, "exec/1/iter/2/tool/c2", "nothing held runs before the decision")

			// Still no decision: the resumed run pauses again at the same call, asking nothing.
			before := len(j.order)
			env, job = agentSetup(j, `{"require_approval_for":["b"]}`, approvalScript())
			out, err = Autonomous(context.Background(), env, job)
			require.NoError(t, err)
			require.Equal(t, run.PendingReview, out.Status)
			require.Len(t, j.order, before)

			env, job = agentSetup(j, `{"require_approval_for":["b"]}`, approvalScript())
			env.reviews["exec/1/iter/2/approval"] = tc.review
			out, err = Autonomous(context.Background(), env, job)
			require.NoError(t, err)
			require.Equal(t, run.Completed, out.Status)
			_, called := j.asked["exec/1/iter/2/tool/c2"]
			require.Equal(t, tc.called, called)
			tools := env.requests["exec/1/iter/3/llm"].Messages
			require.Equal(t, tc.result, tools[len(tools)-1].Content)
			for k, n := range j.asked {
				require.Equal(t, 1, n, k)
			}
		})
	}
}

// everyPhase is the script of a run that goes through every phase: a retried plan, a tool
// step, an adjustment, a gated call (exec/2/iter/1/approval), a replan, the evaluation.
func everyPhase() map[string]openai.ChatCompletionMessage {
	return map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":      text("not a plan"),
		"plan/1/try/2":      planMsg(st{id: "s1", typ: "tool_using", tools: []string{"a"}}, st{id: "s2", typ: "llm_only"}),
		"exec/1/iter/1/llm": callMsg("c1", "a"),
		"exec/1/iter/2/llm": text("s1 result"),
		"reflect/1/try/1":   verdict("adjust", "s3 instead", st{id: "s3", typ: "tool_using", tools: []string{"gated"}}),
		"exec/2/iter/1/llm": callMsg("c2", "gated"),
		"exec/2/iter/2/llm": text("s3 result"),
		"reflect/2/try/1":   verdict("replan", "start over"),
		"plan/2/try/1":      planMsg(st{id: "t1", typ: "llm_only"}),
		"exec/3/llm":        text("t1 result"),
		"reflect/3/try/1":   verdict("pass", "done"),
		"eval/try/1":        evalMsg(true),
	}
}

// TestAutonomousResumesWithoutAskingTwice kills the agent after each journal entry of a run
// that goes through every phase (a retried plan, a tool step, an adjustment, a replan, an
// approval), resumes it on the same journal, and checks that the resumed run ends as an
// uninterrupted one does, having asked every LLM call and tool call exactly once.
func TestAutonomousResumesWithoutAskingTwice(t *testing.T) {
	t.Parallel()
	script := everyPhase()
	approve := func(env *agentEnv) { env.reviews["exec/2/iter/1/approval"] = Review{Decision: Approved} }

	// The uninterrupted run (approved before it asks, so it pauses once and resumes).
	ref := newJournal()
	env, job := agentSetup(ref, "", script)
	approve(env)
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.PendingReview, out.Status)
	env, job = agentSetup(ref, "", script)
	approve(env)
	want, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, want.Status)
	entries := 0
	for _, n := range ref.asked {
		entries += n
	}
	require.Equal(t, 14, entries, "every LLM call of the script and both tool calls, each once")

	for crash := 1; crash < entries; crash++ {
		t.Run(fmt.Sprintf("crash after entry %d", crash), func(t *testing.T) {
			t.Parallel()
			j := newJournal()
			j.crashAt = crash
			var out Outcome
			crashes := 0
			for attempt := 0; attempt < 5; attempt++ {
				env, job := agentSetup(j, "", script)
				approve(env)
				var err error
				out, err = Autonomous(context.Background(), env, job)
				if errors.Is(err, errCrash) {
					crashes++
					continue
				}
				require.NoError(t, err)
				if out.Status != run.PendingReview {
					break
				}
			}
			require.Equal(t, 1, crashes)
			require.Equal(t, want, out)
			require.Equal(t, ref.order, j.order)
			for k, n := range j.asked {
				require.Equal(t, 1, n, "%s asked again", k)
			}
		})
	}
}

// TestAutonomousCallsCarryTheSkillPromptAndTheirType: every call the agent makes keeps the
// skill's system prompt (where a test's [sim-script:NAME] marker lives) and ends its last
// user message with the call's type, [call:plan|step|reflection|evaluate], which a scripted
// sim-llm reads to choose the answer.
func TestAutonomousCallsCarryTheSkillPromptAndTheirType(t *testing.T) {
	t.Parallel()
	env, job := agentSetup(newJournal(), `{}`, twoSteps(nil))
	job.Skill.SystemPrompt = "Be careful. [sim-script:t-1]"
	job.Payload = json.RawMessage(`{"prompt":"reach the goal, quoting [call:evaluate]"}`)
	out, err := Autonomous(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, out.Status)
	want := map[string]string{"plan/1/try/1": "plan", "exec/1/iter/1/llm": "step", "exec/1/iter/2/llm": "step",
		"reflect/1/try/1": "reflection", "exec/2/llm": "step", "reflect/2/try/1": "reflection", "eval/try/1": "evaluate"}
	require.Len(t, env.requests, len(want))
	for key, call := range want {
		req := env.requests[key]
		require.Equal(t, openai.ChatMessageRoleSystem, req.Messages[0].Role, key)
		require.Contains(t, req.Messages[0].Content, "[sim-script:t-1]", key)
		var lastUser string
		for _, m := range req.Messages {
			if m.Role == openai.ChatMessageRoleUser {
				lastUser = m.Content
			}
		}
		require.True(t, strings.HasSuffix(lastUser, "[call:"+call+"]"), "%s: %q", key, lastUser)
	}
}
