package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

// installScript posts a script and returns its state.
func (b *bundle) installScript(t *testing.T, body string) sim.ScriptState {
	t.Helper()
	status, _, raw := b.post(t, "/sim/scripts", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var st sim.ScriptState
	require.NoError(t, json.Unmarshal(raw, &st))
	return st
}

// scriptState reads GET (or DELETE) /sim/scripts/{name}.
func (b *bundle) scriptState(t *testing.T, method, name string) (int, sim.ScriptState) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+"/sim/scripts/"+name, nil)
	require.NoError(t, err)
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var st sim.ScriptState
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, &st), string(raw))
	}
	return resp.StatusCode, st
}

// calls maps each rule of a state to its calls and served counts.
func calls(st sim.ScriptState) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, r := range st.Rules {
		out[r.Name] = [2]int64{r.Calls, r.Served}
	}
	return out
}

// agentRequest is what an agent tier sends: the test's marker in the skill's system
// prompt, the call type in the phase's own instruction.
func agentRequest(script, call, user string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{Model: "sim-fast", Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "You are a careful agent. [sim-script:" + script + "]"},
		{Role: openai.ChatMessageRoleUser, Content: "[call:" + call + "] " + user},
	}}
}

const agentScript = `{"name": "agent-1", "unmatched": "error", "rules": [
  {"name": "plan", "match": {"call": "plan"}, "answers": [
    {"content": "not json at all"},
    {"json": {"steps": [{"step_id": "s1", "description": "look it up", "execution_type": "tool_using", "tools": ["search"]}]}}]},
  {"name": "step", "match": {"call": "step"}, "answers": [
    {"tool_calls": [{"name": "search", "arguments": {"q": "paris"}}, {"name": "fetch", "arguments": "{\"url\":\"x\"}", "id": "call_fixed"}]},
    {"content": "Paris is sunny."}]},
  {"name": "reflect", "match": {"call": "reflection"}, "exhausted": "error", "answers": [
    {"json": {"verdict": "adjust", "reasoning": "step 2 needs the date"}},
    {"json": {"verdict": "pass", "reasoning": "grounded in the search result"}}]}
]}`

// TestScriptAnswersInOrder: each call type gets its rule's answers in order, over the
// OpenAI wire format, with usage counted as for hash answers and the counts per rule.
func TestScriptAnswersInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	st := b.installScript(t, agentScript)
	require.Equal(t, map[string][2]int64{"plan": {}, "step": {}, "reflect": {}}, calls(st))
	require.Equal(t, 2, st.Rules[0].Remaining)

	ask := func(call string) openai.ChatCompletionResponse {
		t.Helper()
		resp, err := b.client.CreateChatCompletion(ctx, agentRequest("agent-1", call, "What is the weather in Paris?"))
		require.NoError(t, err)
		return resp
	}
	plan1 := ask("plan")
	require.Equal(t, "not json at all", plan1.Choices[0].Message.Content)
	require.Equal(t, openai.FinishReasonStop, plan1.Choices[0].FinishReason)
	require.Equal(t, 4, plan1.Usage.CompletionTokens, "one word, one token")
	require.Equal(t, plan1.Usage.PromptTokens+4, plan1.Usage.TotalTokens)

	plan2 := ask("plan")
	want := `{"steps":[{"description":"look it up","execution_type":"tool_using","step_id":"s1","tools":["search"]}]}`
	require.Equal(t, want, plan2.Choices[0].Message.Content)
	require.Equal(t, (len(want)+3)/4, plan2.Usage.CompletionTokens, "JSON counts one token per 4 characters")

	step1 := ask("step")
	msg := step1.Choices[0].Message
	require.Equal(t, openai.FinishReasonToolCalls, step1.Choices[0].FinishReason)
	require.Len(t, msg.ToolCalls, 2)
	require.Equal(t, "search", msg.ToolCalls[0].Function.Name)
	require.JSONEq(t, `{"q":"paris"}`, msg.ToolCalls[0].Function.Arguments)
	require.True(t, strings.HasPrefix(msg.ToolCalls[0].ID, "call_"))
	require.Equal(t, "fetch", msg.ToolCalls[1].Function.Name)
	require.Equal(t, `{"url":"x"}`, msg.ToolCalls[1].Function.Arguments)
	require.Equal(t, "call_fixed", msg.ToolCalls[1].ID)
	require.Equal(t, (len(`{"q":"paris"}`)+3)/4+(len(`{"url":"x"}`)+3)/4, step1.Usage.CompletionTokens)

	require.Equal(t, "Paris is sunny.", ask("step").Choices[0].Message.Content)
	require.Equal(t, "Paris is sunny.", ask("step").Choices[0].Message.Content, "exhausted: repeat is the default")

	require.Contains(t, ask("reflection").Choices[0].Message.Content, `"verdict":"adjust"`)
	require.Contains(t, ask("reflection").Choices[0].Message.Content, `"verdict":"pass"`)
	_, err := b.client.CreateChatCompletion(ctx, agentRequest("agent-1", "reflection", "again"))
	requireAPIError(t, err, http.StatusBadRequest, "sim_script_exhausted")
	_, err = b.client.CreateChatCompletion(ctx, agentRequest("agent-1", "judge", "which?"))
	requireAPIError(t, err, http.StatusBadRequest, "sim_script_unmatched")

	_, st = b.scriptState(t, http.MethodGet, "agent-1")
	require.Equal(t, map[string][2]int64{"plan": {2, 2}, "step": {3, 3}, "reflect": {3, 2}}, calls(st),
		"an exhausted error is a call of the rule but no answer served")
	require.EqualValues(t, 1, st.Unmatched)
	require.Zero(t, st.Rules[0].Remaining)

	stats := b.sim.Stats()
	require.EqualValues(t, 7, stats.Total.Served)
	require.EqualValues(t, 2, stats.BadRequests, "script errors are the test's mistakes: 400s")
}

func requireAPIError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *openai.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, status, ae.HTTPStatusCode)
	if code != "" {
		require.Equal(t, code, ae.Code)
	}
}

// TestScriptSelection: a script is chosen by the marker in any instruction message, by
// metadata (what passes through the router) or by header; two tests' scripts never mix;
// a request naming no script gets the hash answer; naming a missing one is a 400.
func TestScriptSelection(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	for _, name := range []string{"test-a", "test-b"} {
		b.installScript(t, `{"name": "`+name+`", "rules": [{"match": {"call": "plan"},
			"answers": [{"content": "`+name+` one"}, {"content": "`+name+` two"}]}]}`)
	}
	ask := func(req openai.ChatCompletionRequest) string {
		t.Helper()
		resp, err := b.client.CreateChatCompletion(ctx, req)
		require.NoError(t, err)
		return resp.Choices[0].Message.Content
	}
	// Interleaved: each script keeps its own position.
	require.Equal(t, "test-a one", ask(agentRequest("test-a", "plan", "goal")))
	require.Equal(t, "test-b one", ask(agentRequest("test-b", "plan", "goal")))
	require.Equal(t, "test-a two", ask(agentRequest("test-a", "plan", "goal")))

	// Marker in the user message (a payload), call type by metadata.
	byMeta := userRequest("sim-fast", "[sim-script:test-b] decompose this goal")
	byMeta.Metadata = map[string]string{"sim_call": "plan"}
	require.Equal(t, "test-b two", ask(byMeta))

	// Script and call type by metadata only, no marker at all.
	plain := userRequest("sim-fast", "decompose this goal")
	plain.Metadata = map[string]string{"sim_script": "test-a", "sim_call": "plan"}
	require.Equal(t, "test-a two", ask(plain), "exhausted: repeat")

	// A marker in a tool result or an assistant message does not count.
	echoed := userRequest("sim-fast", "hello")
	echoed.Messages = append(echoed.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "[sim-script:test-a] [call:plan]"})
	plainResp, err := setup(t, sim.Config{}).client.CreateChatCompletion(ctx, echoed)
	require.NoError(t, err)
	require.Equal(t, plainResp.Choices[0].Message.Content, ask(echoed), "no script: the hash answer, as without scripts")

	// Header (clients that talk to sim-llm directly).
	status, _, raw := b.postWithHeaders(t, "/v1/chat/completions", userRequest("sim-fast", "x"),
		map[string]string{"X-Sim-Script": "test-b", "X-Sim-Call": "plan"})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), "test-b two")

	_, err = b.client.CreateChatCompletion(ctx, agentRequest("nobody", "plan", "goal"))
	requireAPIError(t, err, http.StatusBadRequest, "sim_script_not_found")

	_, a := b.scriptState(t, http.MethodGet, "test-a")
	_, bb := b.scriptState(t, http.MethodGet, "test-b")
	require.EqualValues(t, 3, a.Rules[0].Calls)
	require.EqualValues(t, 3, bb.Rules[0].Calls)
}

func (b *bundle) postWithHeaders(t *testing.T, path string, body any, h map[string]string) (int, http.Header, []byte) {
	t.Helper()
	buf, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(string(buf)))
	require.NoError(t, err)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

// TestScriptMatching: regex over the chosen text, schema name, last role, model, and
// first-match-wins order with exhausted: next and hash.
func TestScriptMatching(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	b.installScript(t, `{"name": "m", "rules": [
	  {"name": "after-tool", "match": {"last_role": "tool"}, "answers": [{"content": "closing the loop"}]},
	  {"name": "judge", "match": {"regex": "(?i)pick the best", "in": "system"}, "answers": [{"json": {"best": 2}}]},
	  {"name": "schema", "match": {"schema": "reflection"}, "answers": [{"json": {"verdict": "replan"}}], "exhausted": "next"},
	  {"name": "fallback", "match": {"regex": "verdict|anything"}, "answers": [{"hash": true}, {"content": "last"}]},
	  {"name": "large-only", "match": {"model": "sim-large"}, "answers": [{"content": "large"}], "exhausted": "hash"}
	]}`)
	ask := func(req openai.ChatCompletionRequest) string {
		t.Helper()
		req.Metadata = map[string]string{"sim_script": "m"}
		resp, err := b.client.CreateChatCompletion(ctx, req)
		require.NoError(t, err)
		return resp.Choices[0].Message.Content
	}
	judge := userRequest("sim-fast", "three answers follow")
	judge.Messages = append([]openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "Pick the best answer."}}, judge.Messages...)
	require.JSONEq(t, `{"best":2}`, ask(judge))

	tool := userRequest("sim-fast", "weather?")
	tool.Messages = append(tool.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "w", Arguments: "{}"}}}},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "c1", Content: "sunny"})
	require.Equal(t, "closing the loop", ask(tool))

	refl := userRequest("sim-fast", "give a verdict")
	refl.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "reflection", Schema: json.RawMessage(`{"type":"object"}`)}}
	require.JSONEq(t, `{"verdict":"replan"}`, ask(refl))
	// exhausted: next — falls to "fallback", whose first answer is the hash answer.
	hashed, err := setup(t, sim.Config{}).client.CreateChatCompletion(ctx, refl)
	require.NoError(t, err)
	require.Equal(t, hashed.Choices[0].Message.Content, ask(refl))
	require.Equal(t, "last", ask(refl))

	large := userRequest("sim-large", "hello")
	require.Equal(t, "large", ask(large))
	plain, err := setup(t, sim.Config{}).client.CreateChatCompletion(ctx, large)
	require.NoError(t, err)
	require.Equal(t, plain.Choices[0].Message.Content, ask(large), "exhausted: hash")
	require.Equal(t, plain.Choices[0].Message.Content, ask(userRequest("sim-large", "hello")))

	// Unmatched (default hash): a sim-fast request no rule takes.
	unmatched := userRequest("sim-fast", "hello")
	plainFast, err := setup(t, sim.Config{}).client.CreateChatCompletion(ctx, unmatched)
	require.NoError(t, err)
	require.Equal(t, plainFast.Choices[0].Message.Content, ask(unmatched))

	_, st := b.scriptState(t, http.MethodGet, "m")
	require.Equal(t, map[string][2]int64{"after-tool": {1, 1}, "judge": {1, 1}, "schema": {1, 1}, "fallback": {2, 2}, "large-only": {3, 3}}, calls(st))
	require.EqualValues(t, 1, st.Unmatched)
}

// TestScriptErrorsAndLatency: scripted 429 and 5xx answers reach the client with their
// status, Retry-After and counters; a scripted latency replaces the model's.
func TestScriptErrorsAndLatency(t *testing.T) {
	t.Parallel()
	// The model would take an hour: only the script's latency lets the test finish.
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "slow", Latency: "1h"}}})
	ctx := ctxT(t)
	b.installScript(t, `{"name": "e", "rules": [{"answers": [
	  {"error": {"status": 429, "retry_after": "1500ms"}, "latency": "0s"},
	  {"error": {"status": 503, "message": "upstream down"}, "latency": "0s"},
	  {"error": {"status": 400, "code": "context_length_exceeded"}, "latency": "0s"},
	  {"content": "recovered", "latency": "1ms"},
	  {"hash": true, "latency": "0s"}]}]}`)
	req := userRequest("slow", "hi [sim-script:e]")

	status, h, raw := b.post(t, "/v1/chat/completions", req)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "2", h.Get("Retry-After"))
	require.Equal(t, "1500", h.Get("retry-after-ms"))
	require.JSONEq(t, `{"error":{"message":"sim-llm scripted error 429","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, string(raw))

	_, err := b.client.CreateChatCompletion(ctx, req)
	requireAPIError(t, err, http.StatusServiceUnavailable, "")
	require.ErrorContains(t, err, "upstream down")
	_, err = b.client.CreateChatCompletion(ctx, req)
	requireAPIError(t, err, http.StatusBadRequest, "context_length_exceeded")

	resp, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "recovered", resp.Choices[0].Message.Content)
	resp, err = b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices[0].Message.Content)

	m := b.sim.Stats().Models["slow"]
	require.EqualValues(t, 4, m.Requests, "the scripted 400 counts as a bad request, not a model request")
	require.EqualValues(t, 1, m.Refused429)
	require.EqualValues(t, 1, m.Errors5xx)
	require.EqualValues(t, 2, m.Served)
}

// TestScriptStreaming: a streamed scripted answer, parallel tool calls included,
// assembles to the same message as the plain one, with the same usage.
func TestScriptStreaming(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	body := `{"name": "%s", "rules": [{"answers": [
	  {"tool_calls": [{"name": "search", "arguments": {"q": "paris weather today"}}, {"name": "fetch", "arguments": {"url": "https://example.com/a"}}]},
	  {"content": "It is  sunny\nin Paris. "}]}]}`
	b.installScript(t, strings.Replace(body, "%s", "plain", 1))
	b.installScript(t, strings.Replace(body, "%s", "streamed", 1))

	for range 2 {
		plain, err := b.client.CreateChatCompletion(ctx, agentRequest("plain", "step", "weather"))
		require.NoError(t, err)
		sreq := agentRequest("streamed", "step", "weather")
		sreq.Stream = true
		sreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		stream, err := b.client.CreateChatCompletionStream(ctx, sreq)
		require.NoError(t, err)
		var content strings.Builder
		calls := map[int]*openai.ToolCall{}
		var finish openai.FinishReason
		var usage *openai.Usage
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if chunk.Usage != nil {
				usage = chunk.Usage
			}
			for _, ch := range chunk.Choices {
				content.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
				for _, tc := range ch.Delta.ToolCalls {
					cur := calls[*tc.Index]
					if cur == nil {
						cur = &openai.ToolCall{Type: openai.ToolTypeFunction}
						calls[*tc.Index] = cur
					}
					if tc.ID != "" {
						cur.ID = tc.ID
					}
					if tc.Function.Name != "" {
						cur.Function.Name = tc.Function.Name
					}
					cur.Function.Arguments += tc.Function.Arguments
				}
			}
		}
		stream.Close()
		msg := plain.Choices[0].Message
		require.Equal(t, plain.Choices[0].FinishReason, finish)
		require.Equal(t, msg.Content, content.String())
		require.Len(t, calls, len(msg.ToolCalls))
		for i, tc := range msg.ToolCalls {
			require.Equal(t, tc.Function, calls[i].Function)
			require.NotEmpty(t, calls[i].ID)
		}
		require.NotNil(t, usage)
		require.Equal(t, plain.Usage.CompletionTokens, usage.CompletionTokens)
	}
	resp, err := b.client.CreateChatCompletion(ctx, agentRequest("plain", "step", "weather"))
	require.NoError(t, err)
	require.Equal(t, "It is  sunny\nin Paris. ", resp.Choices[0].Message.Content)
	require.Equal(t, 5, resp.Usage.CompletionTokens)
}

// TestScriptMaxTokensTruncates: max_tokens cuts a scripted answer as it cuts a hash one.
func TestScriptMaxTokensTruncates(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.installScript(t, `{"name": "cut", "rules": [{"answers": [{"content": "one two three four"}]}]}`)
	req := agentRequest("cut", "step", "go")
	req.MaxTokens = 2
	resp, err := b.client.CreateChatCompletion(ctxT(t), req)
	require.NoError(t, err)
	require.Equal(t, "one two", resp.Choices[0].Message.Content)
	require.Equal(t, openai.FinishReasonLength, resp.Choices[0].FinishReason)
	require.Equal(t, 2, resp.Usage.CompletionTokens)
}

// TestScriptConcurrentConsumption: concurrent requests on one rule take every answer
// exactly once.
func TestScriptConcurrentConsumption(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	const n = 40
	answers := make([]string, n)
	for i := range answers {
		answers[i] = `{"content": "answer-` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `"}`
	}
	b.installScript(t, `{"name": "par", "rules": [{"exhausted": "error", "answers": [`+strings.Join(answers, ",")+`]}]}`)
	ctx := ctxT(t)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := b.client.CreateChatCompletion(ctx, agentRequest("par", "step", "go"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[resp.Choices[0].Message.Content]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, seen, n)
	_, st := b.scriptState(t, http.MethodGet, "par")
	require.EqualValues(t, n, st.Rules[0].Calls)
	require.EqualValues(t, n, st.Rules[0].Served)
	require.Zero(t, st.Rules[0].Remaining)
}

// TestScriptEndpoints: validation of POST /sim/scripts, GET, listing, replace (which
// rewinds), DELETE returning the final counts.
func TestScriptEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	for body, want := range map[string]string{
		`{"name": "x", "rules": []}`:                                                       "at least one rule",
		`{"name": "x", "rules": [{"answers": []}]}`:                                        "rules[0].answers",
		`{"name": "x", "rules": [{"answers": [{"content": "a", "hash": true}]}]}`:          "exactly one of",
		`{"name": "x", "rules": [{"answers": [{}]}]}`:                                      "exactly one of",
		`{"name": "x", "rules": [{"match": {"regex": "("}, "answers": [{"hash": true}]}]}`: "rules[0].match.regex",
		`{"name": "x", "rules": [{"exhausted": "loop", "answers": [{"hash": true}]}]}`:     "rules[0].exhausted",
		`{"name": "x", "rules": [{"answers": [{"error": {"status": 200}}]}]}`:              "error.status 200",
		`{"name": "x", "rules": [{"answers": [{"content": "a", "latency": "soon"}]}]}`:     "latency",
		`{"name": "x", "rules": [{"answers": [{"tool_calls": [{"arguments": {}}]}]}]}`:     "tool_calls[0].name",
		`{"name": "x y", "rules": [{"answers": [{"hash": true}]}]}`:                        "script name",
		`{"name": "x", "rules": [{"answers": [{"hash": true}]}], "extra": 1}`:              "unknown field",
		`{"name": "x", "unmatched": "ignore", "rules": [{"answers": [{"hash": true}]}]}`:   "unmatched",
	} {
		status, _, raw := b.post(t, "/sim/scripts", body)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, string(raw), want, body)
	}
	status, _, raw := b.post(t, "/sim/scripts", `{"name": "model:nope", "rules": [{"answers": [{"hash": true}]}]}`)
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, string(raw), "model_not_found")

	body := `{"name": "s", "rules": [{"answers": [{"content": "a"}, {"content": "b"}]}]}`
	b.installScript(t, body)
	ask := func() string {
		resp, err := b.client.CreateChatCompletion(ctxT(t), agentRequest("s", "x", "go"))
		require.NoError(t, err)
		return resp.Choices[0].Message.Content
	}
	require.Equal(t, "a", ask())
	b.installScript(t, body)
	require.Equal(t, "a", ask(), "posting a script again replaces and rewinds it")

	resp, err := b.http.Get(b.url + "/sim/scripts")
	require.NoError(t, err)
	var list struct {
		Scripts []sim.ScriptState `json:"scripts"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	require.Len(t, list.Scripts, 1)

	st, final := b.scriptState(t, http.MethodDelete, "s")
	require.Equal(t, http.StatusOK, st)
	require.EqualValues(t, 1, final.Rules[0].Served)
	st, _ = b.scriptState(t, http.MethodDelete, "s")
	require.Equal(t, http.StatusNotFound, st)
	st, _ = b.scriptState(t, http.MethodGet, "s")
	require.Equal(t, http.StatusNotFound, st)
	_, err = b.client.CreateChatCompletion(ctxT(t), agentRequest("s", "x", "go"))
	requireAPIError(t, err, http.StatusBadRequest, "sim_script_not_found")
}

// TestModelScript: a model's default script (Config.Scripts, --script) answers every
// request for the model that names no script; other models keep their hash answers.
func TestModelScript(t *testing.T) {
	t.Parallel()
	content := "scripted"
	b := setup(t, sim.Config{
		Models:  []sim.ModelConfig{{Name: "m"}, {Name: "other"}},
		Scripts: map[string]sim.Script{"m": {Rules: []sim.Rule{{Answers: []sim.Answer{{Content: &content}}}}}},
	})
	ctx := ctxT(t)
	resp, err := b.client.CreateChatCompletion(ctx, userRequest("m", "hello"))
	require.NoError(t, err)
	require.Equal(t, "scripted", resp.Choices[0].Message.Content)
	resp, err = b.client.CreateChatCompletion(ctx, userRequest("other", "hello"))
	require.NoError(t, err)
	require.NotEqual(t, "scripted", resp.Choices[0].Message.Content)
	status, st := b.scriptState(t, http.MethodGet, "model:m")
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 1, st.Rules[0].Served)

	_, err = sim.New(sim.Config{Scripts: map[string]sim.Script{"ghost": {Rules: []sim.Rule{{Answers: []sim.Answer{{Hash: true}}}}}}}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "ghost")
}

// TestScriptWaitsEndOnCancel: a scripted latency ends when the client goes away.
func TestScriptWaitsEndOnCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	b.installScript(t, `{"name": "w", "rules": [{"answers": [{"content": "late", "latency": "1h"}]}]}`)
	ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer cancel()
	_, err := b.client.CreateChatCompletion(ctx, agentRequest("w", "x", "go"))
	require.Error(t, err)
	require.Eventually(t, func() bool { return b.sim.Stats().Total.Cancelled == 1 }, 10*time.Second, 5*time.Millisecond)
	_, st := b.scriptState(t, http.MethodGet, "w")
	require.EqualValues(t, 1, st.Rules[0].Calls)
	require.Zero(t, st.Rules[0].Served, "a cancelled answer is consumed, not served")
}
