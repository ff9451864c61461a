package gemini_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline/pipelinetest"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/gemini"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

func newAdapter(t *testing.T, baseURL, apiKey string) provider.Adapter {
	a, err := gemini.New(provider.Config{Kind: provider.Gemini, BaseURL: baseURL, APIKey: apiKey})
	require.NoError(t, err)
	return a
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Driver{New: newAdapter, Wire: wire{}, ToolCallIDs: false, RateLimitHeaders: false})
}

// TestConformanceThroughTheRouter passes the suite through the router's whole chain
// (pipeline.New: every link on), so no link changes what the adapter sends or answers.
func TestConformanceThroughTheRouter(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Driver{New: pipelinetest.Start(t).New(provider.Gemini), Wire: wire{}, ToolCallIDs: false, RateLimitHeaders: false})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := gemini.New(provider.Config{Kind: provider.Gemini})
	require.ErrorContains(t, err, "APIKey")
	_, err = gemini.New(provider.Config{Kind: provider.Gemini, Project: "p"})
	require.ErrorContains(t, err, "Location")
	_, err = gemini.New(provider.Config{Kind: provider.Anthropic, APIKey: "k"})
	require.Error(t, err)
}

// Gemini has no call ids: the adapter derives them from position and name, the same for
// the same answer, and finds the function name again from the id on the next turn.
func TestDerivedToolCallIDs(t *testing.T) {
	t.Parallel()
	sc := providertest.Scenario{ToolCalls: []providertest.ToolCall{
		{Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time", Arguments: `{}`}},
		Finish: openai.FinishReasonToolCalls}
	f := providertest.NewFake(t, wire{}, sc)
	a := newAdapter(t, f.URL, providertest.Key)
	req := openai.ChatCompletionRequest{Model: "gemini-x", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
	resp, err := a.Chat(context.Background(), req)
	require.NoError(t, err)
	calls := resp.Choices[0].Message.ToolCalls
	require.Equal(t, "call_0_get_weather", calls[0].ID)
	require.Equal(t, "call_1_get_time", calls[1].ID)

	streamed, err := a.ChatStream(context.Background(), req, nil)
	require.NoError(t, err)
	require.Equal(t, calls, streamed.Choices[0].Message.ToolCalls, "streaming derives the same ids")
}

// A JSON object tool result is passed as the functionResponse object; plain text is
// wrapped as {"result": text} because Gemini requires an object.
func TestFunctionResponseObject(t *testing.T) {
	t.Parallel()
	var body []byte
	f := providertest.NewFake(t, bodyWire{got: &body}, providertest.Scenario{Text: "ok", Finish: openai.FinishReasonStop})
	_, err := newAdapter(t, f.URL, providertest.Key).Chat(context.Background(), openai.ChatCompletionRequest{
		Model: "gemini-x",
		Messages: []openai.ChatCompletionMessage{
			{Role: "user", Content: "hi"},
			{Role: "assistant", ToolCalls: []openai.ToolCall{
				{ID: "call_0_a", Type: "function", Function: openai.FunctionCall{Name: "a", Arguments: `{}`}},
				{ID: "call_1_b", Type: "function", Function: openai.FunctionCall{Name: "b", Arguments: `{}`}}}},
			{Role: "tool", ToolCallID: "call_0_a", Content: `{"temp":21}`},
			{Role: "tool", ToolCallID: "call_1_b", Content: `plain`},
		},
	})
	require.NoError(t, err)
	<-f.Arrived()
	var in struct {
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	require.NoError(t, json.Unmarshal(body, &in))
	require.Len(t, in.Contents, 3, "both results travel in one user turn")
	require.Equal(t, "user", in.Contents[2].Role)
	require.JSONEq(t, `{"functionResponse":{"name":"a","response":{"temp":21}}}`, string(in.Contents[2].Parts[0]))
	require.JSONEq(t, `{"functionResponse":{"name":"b","response":{"result":"plain"}}}`, string(in.Contents[2].Parts[1]))
}

type bodyWire struct {
	wire
	got *[]byte
}

func (b bodyWire) Decode(r *http.Request, body []byte) (providertest.Request, error) {
	*b.got = body
	return b.wire.Decode(r, body)
}

// Gemini 3 requires each function call's thoughtSignature back; it survives the
// OpenAI round trip inside the tool call id.
func TestThoughtSignatureRoundTrip(t *testing.T) {
	t.Parallel()
	var body []byte
	f := providertest.NewFake(t, sigWire{bodyWire{got: &body}}, providertest.Scenario{})
	a := newAdapter(t, f.URL, providertest.Key)
	resp, err := a.Chat(context.Background(), openai.ChatCompletionRequest{Model: "gemini-x",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	call := resp.Choices[0].Message.ToolCalls[0]

	_, err = a.Chat(context.Background(), openai.ChatCompletionRequest{Model: "gemini-x",
		Messages: []openai.ChatCompletionMessage{
			{Role: "user", Content: "hi"},
			{Role: "assistant", ToolCalls: []openai.ToolCall{call}},
			{Role: "tool", ToolCallID: call.ID, Content: "sunny"},
		}})
	require.NoError(t, err)
	require.Contains(t, string(body), `"thoughtSignature":"c2lnbmF0dXJl"`, "the signature goes back on the functionCall part")
}

type sigWire struct{ bodyWire }

func (sigWire) Answer(w http.ResponseWriter, _ providertest.Request, _ providertest.Scenario) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[
		{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2lnbmF0dXJl"}]},
		"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5}}`))
}
