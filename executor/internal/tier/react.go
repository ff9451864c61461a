package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// React runs tier 2 (tool_using): a ReAct loop. The first LLM call must call a tool
// (tool_choice required), later ones choose (auto); the loop ends on an answer without
// tool calls, or after the skill's max_iterations with completed_max_iterations and a
// warning. The tool calls of one answer run concurrently. Each iteration is a
// react_iteration span (step "iter/<n>") with its llm_call and tool_call spans below it.
//
// Every step is keyed ("iter/<n>/llm", "iter/<n>/tool/<call id>") and journaled by the Env,
// so a resumed run walks the same loop and replays instead of calling again.
func React(ctx context.Context, env Env, job Job) (Outcome, error) {
	msgs, err := Messages(job.Skill, job.Payload)
	if err != nil {
		return Outcome{}, err
	}
	tools, err := env.Tools(ctx)
	if err != nil {
		return Outcome{}, err
	}
	if len(tools) == 0 {
		return Outcome{}, Permanent(apierr.CodeNoToolsAvailable,
			"skill %q lists tools %v but none is registered and granted to the organisation", job.JobType, job.Skill.Tools)
	}
	lp := newLoop(tools, job.Skill.MaxIterations)
	lp.parent = job.RootSpanID
	out, _, err := lp.run(ctx, env, job, msgs)
	return out, err
}

// loop is one ReAct loop: the tool_using tier's, or a tool_using step of an autonomous
// agent's plan. Its steps are keyed under prefix ("" for the tier, "exec/3/" for the
// agent's third executed step), so two loops of one run never share a journal key.
type loop struct {
	prefix  string
	parent  string // the span the iterations hang under
	maxIter int
	defs    []openai.Tool
	byName  map[string]tool.Tool
	// gated says whether a call of the tool waits for a reviewer; default: the tool's
	// RequiresApproval.
	gated func(tool.Tool) bool
	// rejectAsResult hands a rejected call's reason to the LLM as its tool result and goes
	// on (the autonomous tier); otherwise a rejection ends the run rejected.
	rejectAsResult bool
}

// toolResult is one tool call of a loop and what it returned, for the agent's reflector.
type toolResult struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    string          `json:"result"`
}

func newLoop(tools []tool.Tool, maxIter int) *loop {
	lp := &loop{maxIter: maxIter, byName: make(map[string]tool.Tool, len(tools)),
		defs: make([]openai.Tool, 0, len(tools)), gated: func(t tool.Tool) bool { return t.RequiresApproval }}
	for _, t := range tools {
		lp.byName[t.Name] = t
		lp.defs = append(lp.defs, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.Parameters)}})
	}
	if lp.maxIter <= 0 {
		lp.maxIter = 5
	}
	return lp
}

// run walks the loop from msgs. The outcome is completed (a final answer),
// completed_max_iterations, pending_review or rejected; the tool results are every call's,
// in order.
func (lp *loop) run(ctx context.Context, env Env, job Job, msgs []openai.ChatCompletionMessage) (Outcome, []toolResult, error) {
	var last string
	var results []toolResult
	for i := 1; i <= lp.maxIter; i++ {
		if err := env.CheckCancel(ctx); err != nil {
			return Outcome{}, results, err
		}
		// The iteration's name and number come from its step, so a resumed run that walks the
		// loop again names each iteration as the first attempt did.
		it := env.StepSpan(ctx, lp.parent, span.ReactIteration, fmt.Sprintf("iteration %d", i),
			fmt.Sprintf("%siter/%d", lp.prefix, i), map[string]any{"iteration": i})
		out, done, err := lp.iterate(ctx, env, job, it, i, &msgs, &results)
		if err != nil {
			env.EndSpan(context.WithoutCancel(ctx), it, span.Error)
			return Outcome{}, results, err
		}
		env.EndSpan(ctx, it, span.OK)
		if done {
			return out, results, nil
		}
		last = out.Output["content"].(string)
		env.Event(ctx, event.JobProgress, map[string]any{"iteration": i, "max_iterations": lp.maxIter})
	}
	return Outcome{
		Status:   run.CompletedMaxIterations,
		Output:   map[string]any{"content": last, "iterations": lp.maxIter},
		Warnings: []string{fmt.Sprintf("%s: the loop reached max_iterations (%d) without a final answer", apierr.CodeMaxIterations, lp.maxIter)},
	}, results, nil
}

// iterate runs one iteration. done is true when the loop ends here (final answer, pause or
// rejection); otherwise out.Output["content"] is the answer's text so far.
func (lp *loop) iterate(ctx context.Context, env Env, job Job, it *span.Span, i int, msgs *[]openai.ChatCompletionMessage,
	log *[]toolResult) (Outcome, bool, error) {
	req := baseRequest(job.Skill, *msgs)
	req.Tools = lp.defs
	req.ToolChoice = "auto"
	if i == 1 {
		req.ToolChoice = "required"
	}
	ans, err := env.Chat(ctx, fmt.Sprintf("%siter/%d/llm", lp.prefix, i), it.ID, req)
	if err != nil {
		return Outcome{}, false, err
	}
	if len(ans.Choices) == 0 {
		return Outcome{}, false, Permanent(apierr.CodeLLMEmptyAnswer, "the LLM answered without a choice")
	}
	msg := ans.Choices[0].Message
	if len(msg.ToolCalls) == 0 {
		it.Set("final", true)
		return Outcome{Status: run.Completed, Output: map[string]any{
			"content": msg.Content, "finish_reason": ans.Choices[0].FinishReason,
			"provider": ans.Provider, "model": ans.Model, "iterations": i,
		}}, true, nil
	}
	msg.Role = openai.ChatMessageRoleAssistant
	*msgs = append(*msgs, msg)
	it.Set("tool_calls", len(msg.ToolCalls))

	var held []Held
	for _, c := range msg.ToolCalls {
		if t, ok := lp.byName[c.Function.Name]; ok && lp.gated(t) {
			held = append(held, Held{Tool: t.Name, CallID: c.ID, Arguments: argsJSON(c.Function.Arguments)})
		}
	}
	rejected := ""
	if len(held) > 0 {
		rv, err := env.Approval(ctx, fmt.Sprintf("%siter/%d/approval", lp.prefix, i), held)
		if err != nil {
			return Outcome{}, false, err
		}
		switch rv.Decision {
		case Pending:
			it.Set("paused_for_approval", true)
			return Outcome{Status: run.PendingReview, Held: held,
				Output: map[string]any{"reasoning": msg.Content}}, true, nil
		case Rejected:
			if !lp.rejectAsResult {
				return Outcome{Status: run.Rejected, Held: held, Reason: "a reviewer rejected the tool call"}, true, nil
			}
			rejected = "error: a reviewer rejected this call and it was not made; find another way"
			if rv.Reason != "" {
				rejected += ". The reviewer's reason: " + rv.Reason
			}
			it.Set("rejected", true)
		}
	}

	results := make([]string, len(msg.ToolCalls))
	errs := make([]error, len(msg.ToolCalls))
	var wg sync.WaitGroup
	for j, c := range msg.ToolCalls {
		wg.Go(func() {
			if err := env.CheckCancel(ctx); err != nil {
				errs[j] = err
				return
			}
			id := c.ID
			if id == "" {
				id = strconv.Itoa(j)
			}
			step := fmt.Sprintf("%siter/%d/tool/%s", lp.prefix, i, id)
			t, ok := lp.byName[c.Function.Name]
			switch {
			case !ok:
				// A tool that was not offered: the LLM hears so and may try again.
				results[j] = fmt.Sprintf("error: there is no tool named %q; the available tools are the ones listed", c.Function.Name)
			case rejected != "" && lp.gated(t):
				results[j] = rejected
			default:
				results[j], errs[j] = env.CallTool(ctx, step, it.ID, t, c)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return Outcome{}, false, err
		}
	}
	for j, c := range msg.ToolCalls {
		*msgs = append(*msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: c.ID,
			Name: c.Function.Name, Content: results[j]})
		*log = append(*log, toolResult{Tool: c.Function.Name, Arguments: argsJSON(c.Function.Arguments), Result: results[j]})
	}
	return Outcome{Output: map[string]any{"content": msg.Content}}, false, nil
}

// argsJSON keeps valid JSON arguments as they are and quotes anything else.
func argsJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
