package sim_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func TestDeterminism(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	req := userRequest("sim-large", "Summarise the quarterly report.")

	first, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	second, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, first.Choices[0].Message.Content)
	require.Equal(t, first.Choices[0].Message.Content, second.Choices[0].Message.Content)
	require.Equal(t, first.Usage, second.Usage)
	require.Equal(t, openai.FinishReasonStop, first.Choices[0].FinishReason)
	require.Equal(t, "sim-llm", first.SystemFingerprint)

	// A second server with the same (default) seed answers the same: content depends on
	// nothing held in process memory.
	other := setup(t, sim.Config{})
	again, err := other.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first.Choices[0].Message.Content, again.Choices[0].Message.Content)

	// Another --seed answers differently, and a request's own seed overrides the server's.
	seeded := setup(t, sim.Config{Seed: 42})
	s42, err := seeded.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.NotEqual(t, first.Choices[0].Message.Content, s42.Choices[0].Message.Content)
	withSeed := req
	seed := 42
	withSeed.Seed = &seed
	r42, err := b.client.CreateChatCompletion(ctx, withSeed)
	require.NoError(t, err)
	require.Equal(t, s42.Choices[0].Message.Content, r42.Choices[0].Message.Content)

	// Another prompt answers differently.
	diff, err := b.client.CreateChatCompletion(ctx, userRequest("sim-large", "Something else entirely."))
	require.NoError(t, err)
	require.NotEqual(t, first.Choices[0].Message.Content, diff.Choices[0].Message.Content)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	text := strings.Repeat("abcd", 25) // 100 characters: 25 tokens at chars/4
	resp, err := b.client.CreateChatCompletion(ctxT(t), userRequest("sim-fast", text))
	require.NoError(t, err)
	require.Equal(t, 25, resp.Usage.PromptTokens)
	require.Equal(t, len(strings.Fields(resp.Choices[0].Message.Content)), resp.Usage.CompletionTokens)
	require.Equal(t, resp.Usage.PromptTokens+resp.Usage.CompletionTokens, resp.Usage.TotalTokens)
	require.NotNil(t, resp.Usage.PromptTokensDetails)
	require.Zero(t, resp.Usage.PromptTokensDetails.CachedTokens)

	_, _, raw := b.post(t, "/v1/chat/completions", userRequest("sim-fast", "x"))
	require.Contains(t, string(raw), `"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":0}`)
}

func TestMaxTokensTruncates(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", Output: "constant:50"}}})
	ctx := ctxT(t)
	full, err := b.client.CreateChatCompletion(ctx, userRequest("m", "hello"))
	require.NoError(t, err)
	require.Equal(t, 50, full.Usage.CompletionTokens)
	require.Equal(t, openai.FinishReasonStop, full.Choices[0].FinishReason)

	req := userRequest("m", "hello")
	req.MaxTokens = 7
	cut, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.Equal(t, openai.FinishReasonLength, cut.Choices[0].FinishReason)
	require.Equal(t, 7, cut.Usage.CompletionTokens)
	require.True(t, strings.HasPrefix(full.Choices[0].Message.Content, cut.Choices[0].Message.Content),
		"a truncated answer is a prefix of the full one")

	req = userRequest("m", "hello")
	req.MaxCompletionTokens = 3
	cut, err = b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 3, cut.Usage.CompletionTokens)
	require.Equal(t, openai.FinishReasonLength, cut.Choices[0].FinishReason)
}

func weatherTools() []openai.Tool {
	return []openai.Tool{{
		Type: openai.ToolTypeFunction,
		Function: &openai.FunctionDefinition{
			Name:        "get_weather",
			Description: "Current weather for a city",
			Parameters: json.RawMessage(`{
				"type": "object",
				"properties": {
					"city": {"type": "string"},
					"days": {"type": "integer", "minimum": 1, "maximum": 7},
					"units": {"type": "string", "enum": ["metric", "imperial"]},
					"hourly": {"type": "boolean"},
					"tags": {"type": "array", "items": {"type": "string"}},
					"note": {"type": "string"}
				},
				"required": ["city", "days", "units", "hourly", "tags"]
			}`),
		},
	}, {
		Type: openai.ToolTypeFunction,
		Function: &openai.FunctionDefinition{
			Name: "send_email",
			// A typed schema, as Go clients build them.
			Parameters: jsonschema.Definition{
				Type:       jsonschema.Object,
				Properties: map[string]jsonschema.Definition{"to": {Type: jsonschema.String, Description: "email"}},
				Required:   []string{"to"},
			},
		},
	}}
}

func TestToolCallFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	req := userRequest("sim-fast", "What is the weather in Paris?")
	req.Tools = weatherTools()
	req.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "get_weather"}}

	resp, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	ch := resp.Choices[0]
	require.Equal(t, openai.FinishReasonToolCalls, ch.FinishReason)
	require.Len(t, ch.Message.ToolCalls, 1)
	call := ch.Message.ToolCalls[0]
	require.True(t, strings.HasPrefix(call.ID, "call_"), call.ID)
	require.Equal(t, openai.ToolTypeFunction, call.Type)
	require.Equal(t, "get_weather", call.Function.Name)
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(call.Function.Arguments), &args), call.Function.Arguments)
	require.Equal(t, "what is the weather", args["city"], "strings derive from the last user message")
	days, ok := args["days"].(float64)
	require.True(t, ok)
	require.Equal(t, days, float64(int(days)), "integer")
	require.GreaterOrEqual(t, days, 1.0)
	require.LessOrEqual(t, days, 7.0)
	require.Contains(t, []any{"metric", "imperial"}, args["units"])
	require.IsType(t, true, args["hourly"])
	require.IsType(t, []any{}, args["tags"])
	require.NotContains(t, args, "note")
	require.Positive(t, resp.Usage.CompletionTokens)

	// The call is deterministic, id included.
	again, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	require.Equal(t, call, again.Choices[0].Message.ToolCalls[0])

	// "required" and "auto" (absent) call a tool too; which one is a function of the request.
	for _, choice := range []any{"required", "auto", nil} {
		r := req
		r.ToolChoice = choice
		got, err := b.client.CreateChatCompletion(ctx, r)
		require.NoError(t, err)
		require.Equal(t, openai.FinishReasonToolCalls, got.Choices[0].FinishReason, "tool_choice %v", choice)
		require.Len(t, got.Choices[0].Message.ToolCalls, 1)
		require.NoError(t, json.Unmarshal([]byte(got.Choices[0].Message.ToolCalls[0].Function.Arguments), &map[string]any{}))
	}

	// "none" answers in text.
	r := req
	r.ToolChoice = "none"
	none, err := b.client.CreateChatCompletion(ctx, r)
	require.NoError(t, err)
	require.Equal(t, openai.FinishReasonStop, none.Choices[0].FinishReason)
	require.Empty(t, none.Choices[0].Message.ToolCalls)

	// After the tool's result, "auto" answers in text that says it used the result.
	follow := req
	follow.ToolChoice = "auto"
	follow.Messages = append(append([]openai.ChatCompletionMessage{}, req.Messages...),
		ch.Message,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: call.ID, Content: `{"temp_c": 21}`},
	)
	final, err := b.client.CreateChatCompletion(ctx, follow)
	require.NoError(t, err)
	require.Equal(t, openai.FinishReasonStop, final.Choices[0].FinishReason)
	require.Empty(t, final.Choices[0].Message.ToolCalls)
	require.True(t, strings.HasPrefix(final.Choices[0].Message.Content, "Based on the results of get_weather, "),
		final.Choices[0].Message.Content)

	// A function named in tool_choice is the one called.
	r = req
	r.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "send_email"}}
	mail, err := b.client.CreateChatCompletion(ctx, r)
	require.NoError(t, err)
	require.Equal(t, "send_email", mail.Choices[0].Message.ToolCalls[0].Function.Name)
	require.JSONEq(t, `{"to":"what is the weather"}`, mail.Choices[0].Message.ToolCalls[0].Function.Arguments)
}

func TestToolChoiceErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	req := userRequest("sim-fast", "hi")
	req.Tools = weatherTools()
	req.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "missing"}}
	status, _, body := b.post(t, "/v1/chat/completions", req)
	require.Equal(t, http.StatusBadRequest, status)
	e := decodeError(t, body)
	require.Equal(t, "invalid_request_error", e["type"])
	require.Equal(t, "tool_choice", e["param"])

	req = userRequest("sim-fast", "hi")
	req.ToolChoice = "required"
	status, _, _ = b.post(t, "/v1/chat/completions", req)
	require.Equal(t, http.StatusBadRequest, status, "required without tools")
}

func TestJSONMode(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	req := userRequest("sim-large", "List three fruits as JSON.")
	req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	resp, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(resp.Choices[0].Message.Content), &obj), resp.Choices[0].Message.Content)
	require.NotEmpty(t, obj)

	req.ResponseFormat = &openai.ChatCompletionResponseFormat{
		Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
			Name:   "fruits",
			Strict: true,
			Schema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"fruits": {"type": "array", "items": {"$ref": "#/$defs/fruit"}, "minItems": 3},
					"count": {"type": "integer"},
					"ripe": {"type": ["boolean", "null"]},
					"contact": {"type": "string", "format": "email"}
				},
				"required": ["fruits", "count", "ripe", "contact"],
				"$defs": {"fruit": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}, "required": ["name"]}}
			}`),
		},
	}
	resp, err = b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)
	var out struct {
		Fruits []struct {
			Name *string `json:"name"`
		} `json:"fruits"`
		Count   *int   `json:"count"`
		Ripe    *bool  `json:"ripe"`
		Contact string `json:"contact"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), resp.Choices[0].Message.Content)
	require.GreaterOrEqual(t, len(out.Fruits), 3)
	for _, f := range out.Fruits {
		require.NotNil(t, f.Name)
		require.LessOrEqual(t, len(*f.Name), 5)
	}
	require.NotNil(t, out.Count)
	require.NotNil(t, out.Ripe)
	require.Regexp(t, `^[a-z]+@example\.com$`, out.Contact)
}

func TestStreaming(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", Output: "constant:40", Latency: "constant:20s"}}, TimeScale: 0.0001})
	ctx := ctxT(t)
	req := userRequest("m", "Tell me a story.")
	plain, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)

	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := b.client.CreateChatCompletionStream(ctx, req)
	require.NoError(t, err)
	defer stream.Close()
	var content strings.Builder
	var finish openai.FinishReason
	var usage *openai.Usage
	chunks := 0
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		chunks++
		require.Equal(t, "m", chunk.Model)
		if chunk.Usage != nil {
			require.Empty(t, chunk.Choices, "the usage chunk has no choices")
			usage = chunk.Usage
			continue
		}
		require.Nil(t, usage, "usage comes last")
		require.Len(t, chunk.Choices, 1)
		content.WriteString(chunk.Choices[0].Delta.Content)
		if chunk.Choices[0].FinishReason != "" {
			finish = chunk.Choices[0].FinishReason
		}
	}
	require.Equal(t, plain.Choices[0].Message.Content, content.String(), "streamed and plain answers are identical")
	require.Equal(t, openai.FinishReasonStop, finish)
	require.NotNil(t, usage)
	require.Equal(t, plain.Usage, *usage)
	require.Equal(t, 40+3, chunks, "role chunk, one per token, finish chunk, usage chunk")

	// Without include_usage there is no usage chunk; the raw stream ends with [DONE].
	req.StreamOptions = nil
	req.Stream = true
	status, h, raw := b.post(t, "/v1/chat/completions", req)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "text/event-stream", h.Get("Content-Type"))
	require.True(t, strings.HasSuffix(string(raw), "data: [DONE]\n\n"))
	require.NotContains(t, string(raw), `"usage"`)
	for ev := range strings.SplitSeq(strings.TrimSuffix(string(raw), "\n\n"), "\n\n") {
		require.True(t, strings.HasPrefix(ev, "data: "), ev)
	}

	st := b.stats(t)
	require.EqualValues(t, 2, st.Models["m"].Streamed)
	require.EqualValues(t, 3, st.Models["m"].Served)
}

func TestStreamingToolCall(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	req := userRequest("sim-fast", "Weather in Oslo?")
	req.Tools = weatherTools()
	req.ToolChoice = "required"
	plain, err := b.client.CreateChatCompletion(ctx, req)
	require.NoError(t, err)

	stream, err := b.client.CreateChatCompletionStream(ctx, req)
	require.NoError(t, err)
	defer stream.Close()
	var id, name string
	var args strings.Builder
	var finish openai.FinishReason
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, tc := range chunk.Choices[0].Delta.ToolCalls {
			require.NotNil(t, tc.Index)
			require.Zero(t, *tc.Index)
			if tc.ID != "" {
				id = tc.ID
			}
			name += tc.Function.Name
			args.WriteString(tc.Function.Arguments)
		}
		if chunk.Choices[0].FinishReason != "" {
			finish = chunk.Choices[0].FinishReason
		}
	}
	want := plain.Choices[0].Message.ToolCalls[0]
	require.Equal(t, want.ID, id)
	require.Equal(t, want.Function.Name, name)
	require.Equal(t, want.Function.Arguments, args.String())
	require.Equal(t, openai.FinishReasonToolCalls, finish)
}

func TestModelsAndErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	ctx := ctxT(t)
	list, err := b.client.ListModels(ctx)
	require.NoError(t, err)
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
		require.Equal(t, "sim-llm", m.OwnedBy)
	}
	require.Equal(t, []string{"sim-fast", "sim-large", "gpt-4o-mini"}, ids)
	m, err := b.client.GetModel(ctx, "gpt-4o-mini")
	require.NoError(t, err)
	require.Equal(t, "gpt-4o-mini", m.ID)

	resp, err := b.http.Get(b.url + "/v1/models")
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
	resp.Body.Close()
	require.Equal(t, "list", raw["object"])

	resp, err = b.http.Get(b.url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = b.client.CreateChatCompletion(ctx, userRequest("no-such-model", "hi"))
	var apiErr *openai.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusNotFound, apiErr.HTTPStatusCode)
	require.Equal(t, "model_not_found", apiErr.Code)

	status, _, body := b.post(t, "/v1/chat/completions", `{"model": "sim-fast", "messages": [`)
	require.Equal(t, http.StatusBadRequest, status)
	e := decodeError(t, body)
	require.Equal(t, "invalid_request_error", e["type"])
	require.Nil(t, e["code"])

	status, _, body = b.post(t, "/v1/chat/completions", `{"model": "sim-fast", "messages": []}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "messages", decodeError(t, body)["param"])

	st := b.stats(t)
	require.EqualValues(t, 3, st.BadRequests)
	require.Zero(t, st.Total.Requests)
}
