package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// scriptEnv is an Env whose LLM answers come from a script and whose tools record their
// calls; it exercises the loop's control flow. The durable side of the Env is the runner's
// and is tested end to end (e2e/executor_test.go).
type scriptEnv struct {
	answers  []openai.ChatCompletionMessage
	tools    []tool.Tool
	decision Decision
	// gate, when set, blocks every tool call until as many calls as it holds are running.
	gate *sync.WaitGroup

	recorder
	mu       sync.Mutex
	requests []openai.ChatCompletionRequest
	steps    []string
}

// recorder is the spans and events part of the fake Envs: it keeps what a tier records.
type recorder struct {
	rmu      sync.Mutex
	spans    []*span.Span
	events   []string
	eventsOf map[string][]map[string]any
}

func (e *scriptEnv) Chat(_ context.Context, step, parent string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, req)
	e.steps = append(e.steps, step)
	n := len(e.requests) - 1
	if n >= len(e.answers) {
		return nil, fmt.Errorf("script has no answer %d", n)
	}
	a := &routerclient.Answer{}
	a.Choices = []openai.ChatCompletionChoice{{Message: e.answers[n]}}
	return a, nil
}

func (e *recorder) StartSpan(_ context.Context, parent string, typ span.Type, name string, attrs map[string]any) *span.Span {
	s := span.Start("run", "org", "trace", parent, typ, name)
	for k, v := range attrs {
		s.Set(k, v)
	}
	e.rmu.Lock()
	e.spans = append(e.spans, s)
	e.rmu.Unlock()
	return s
}
func (e *recorder) StepSpan(ctx context.Context, parent string, typ span.Type, name, step string, attrs map[string]any) *span.Span {
	return e.StartSpan(ctx, parent, typ, name, attrs).Set("step", step)
}
func (e *recorder) EndSpan(context.Context, *span.Span, span.Status) {}

// CallPrice: sim-large's price, so a test's cost ceiling decides.
func (e *recorder) CallPrice(context.Context) (Price, bool, error) {
	return Price{InputPerMTok: 2.5, OutputPerMTok: 10}, true, nil
}

// Event keeps the event's type and its data as a client reads it (JSON).
func (e *recorder) Event(_ context.Context, typ string, data any) {
	b, _ := json.Marshal(data)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	e.rmu.Lock()
	defer e.rmu.Unlock()
	if e.eventsOf == nil {
		e.eventsOf = map[string][]map[string]any{}
	}
	e.events = append(e.events, typ)
	e.eventsOf[typ] = append(e.eventsOf[typ], m)
}
func (e *scriptEnv) Tools(context.Context) ([]tool.Tool, error) { return e.tools, nil }
func (e *scriptEnv) CallTool(_ context.Context, step, _ string, t tool.Tool, c openai.ToolCall) (string, error) {
	if e.gate != nil {
		e.gate.Done()
		// Every call of the answer must be running at once to get past this.
		passed := make(chan struct{})
		go func() { e.gate.Wait(); close(passed) }()
		select {
		case <-passed:
		case <-time.After(5 * time.Second):
			return "", errors.New("the tool calls of one answer did not run concurrently")
		}
	}
	e.mu.Lock()
	e.steps = append(e.steps, step)
	e.mu.Unlock()
	return t.Name + " says " + c.Function.Arguments, nil
}
func (e *scriptEnv) Approval(context.Context, string, []Held) (Review, error) {
	return Review{Decision: e.decision}, nil
}
func (e *scriptEnv) CheckCancel(context.Context) error { return nil }

func calls(names ...string) openai.ChatCompletionMessage {
	m := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	for i, n := range names {
		m.ToolCalls = append(m.ToolCalls, openai.ToolCall{ID: fmt.Sprintf("c%d", i), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: n, Arguments: `{"q":"x"}`}})
	}
	return m
}

func text(s string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: s}
}

func setup(maxIter int, answers ...openai.ChatCompletionMessage) (*scriptEnv, Job) {
	env := &scriptEnv{answers: answers, decision: Approved, tools: []tool.Tool{
		{Name: "a", Description: "a", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "b", Description: "b", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "gated", Description: "g", RequiresApproval: true, Parameters: json.RawMessage(`{"type":"object"}`)},
	}}
	job := Job{RunID: "run", JobType: "j", RootSpanID: "root", Payload: json.RawMessage(`{"prompt":"hi"}`),
		Skill: skill.Skill{MaxIterations: maxIter, Tools: []string{"a", "b", "gated"}}}
	return env, job
}

func TestReactLoop(t *testing.T) {
	t.Parallel()
	env, job := setup(5, calls("a", "b"), text("done"))
	env.gate = &sync.WaitGroup{}
	env.gate.Add(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := React(ctx, env, job)
	require.NoError(t, err)
	require.Equal(t, run.Completed, out.Status)
	require.Equal(t, "done", out.Output["content"])
	require.Equal(t, 2, out.Output["iterations"])

	// tool_choice: required first, auto after; the tool results are in the second request, in order.
	require.Equal(t, "required", env.requests[0].ToolChoice)
	require.Equal(t, "auto", env.requests[1].ToolChoice)
	second := env.requests[1].Messages
	require.Len(t, second, 4) // user, assistant with calls, two tool results
	require.Equal(t, "c0", second[2].ToolCallID)
	require.Equal(t, `a says {"q":"x"}`, second[2].Content)
	require.Equal(t, "c1", second[3].ToolCallID)
	require.Contains(t, env.steps, "iter/1/llm")
	require.Contains(t, env.steps, "iter/1/tool/c0")
	require.Contains(t, env.steps, "iter/2/llm")
	require.Contains(t, env.events, "job:progress")
	// Each iteration's span is its step's, numbered by the step from the start.
	var iterations []string
	for _, s := range env.spans {
		if s.Type == span.ReactIteration {
			iterations = append(iterations, fmt.Sprintf("%s %s #%v", s.Attributes["step"], s.Name, s.Attributes["iteration"]))
		}
	}
	require.Equal(t, []string{"iter/1 iteration 1 #1", "iter/2 iteration 2 #2"}, iterations)
}

func TestReactMaxIterationsAndUnknownTools(t *testing.T) {
	t.Parallel()
	env, job := setup(2, calls("nope"), calls("a"), text("never asked"))
	out, err := React(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.CompletedMaxIterations, out.Status)
	require.Len(t, out.Warnings, 1)
	require.True(t, strings.HasPrefix(out.Warnings[0], "MAX_ITERATIONS"))
	require.Len(t, env.requests, 2)
	// The unknown tool's error went back to the LLM as its result.
	require.Contains(t, env.requests[1].Messages[2].Content, `no tool named "nope"`)
}

func TestReactApproval(t *testing.T) {
	t.Parallel()
	env, job := setup(5, calls("a", "gated"))
	env.decision = Pending
	out, err := React(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.PendingReview, out.Status)
	require.Len(t, out.Held, 1)
	require.Equal(t, "gated", out.Held[0].Tool)
	require.NotContains(t, env.steps, "iter/1/tool/c0", "no call of a held answer runs before the decision")

	env, job = setup(5, calls("gated"))
	env.decision = Rejected
	out, err = React(context.Background(), env, job)
	require.NoError(t, err)
	require.Equal(t, run.Rejected, out.Status)
}

func TestReactWithoutTools(t *testing.T) {
	t.Parallel()
	env, job := setup(5, text("x"))
	env.tools = nil
	_, err := React(context.Background(), env, job)
	var pe *PermanentError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "NO_TOOLS_AVAILABLE", pe.Code)
}
