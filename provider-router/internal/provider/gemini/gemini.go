// Package gemini is the adapter for Google's Gemini models through google.golang.org/genai,
// on the Gemini API (API key) or on Vertex AI pinned to one region (project and location),
// which is how a residency-bound skill keeps its data in the EU or the US. It translates
// the router's OpenAI-form requests into generateContent calls and the answers back.
package gemini

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"google.golang.org/genai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Adapter talks to one Gemini endpoint. It is safe for concurrent use.
type Adapter struct {
	apiKey string
	client *genai.Client
	now    func() time.Time
}

var _ provider.Adapter = (*Adapter)(nil)

// New returns an adapter for cfg (Kind gemini). With Project and Location set it uses
// Vertex AI in that region (e.g. europe-west4) with Application Default Credentials;
// otherwise the Gemini API with APIKey. BaseURL overrides the endpoint (tests, proxies).
// The SDK does not retry (no RetryOptions): the router does.
func New(cfg provider.Config) (*Adapter, error) {
	if cfg.Kind != provider.Gemini {
		return nil, fmt.Errorf("gemini: unsupported kind %q", cfg.Kind)
	}
	cc := &genai.ClientConfig{HTTPClient: provider.CaptureClient(cfg.HTTPClient)}
	switch {
	case cfg.Project != "" || cfg.Location != "":
		if cfg.Project == "" || cfg.Location == "" {
			return nil, errors.New("gemini: Vertex AI needs both Project and Location")
		}
		cc.Backend, cc.Project, cc.Location = genai.BackendVertexAI, cfg.Project, cfg.Location
	case cfg.APIKey == "":
		return nil, errors.New("gemini: APIKey is required for the Gemini API (or set Project and Location for Vertex AI)")
	default:
		cc.Backend, cc.APIKey = genai.BackendGeminiAPI, cfg.APIKey
	}
	if cfg.BaseURL != "" {
		cc.HTTPOptions.BaseURL = strings.TrimRight(cfg.BaseURL, "/") + "/"
	}
	// The context only serves credential discovery at construction (Vertex AI).
	client, err := genai.NewClient(context.Background(), cc)
	if err != nil {
		return nil, fmt.Errorf("gemini: creating client: %s", provider.Redact(err.Error(), cfg.APIKey))
	}
	return &Adapter{apiKey: cfg.APIKey, client: client, now: time.Now}, nil
}

// Kind reports provider.Gemini.
func (a *Adapter) Kind() provider.Kind { return provider.Gemini }

// Chat sends one generateContent request and translates the answer.
func (a *Adapter) Chat(ctx context.Context, req openai.ChatCompletionRequest) (*provider.Response, error) {
	contents, cfg, err := toRequest(req)
	if err != nil {
		return nil, a.invalid(err)
	}
	ctx, sink := provider.WithHeaderSink(ctx)
	resp, err := a.client.Models.GenerateContent(ctx, req.Model, contents, cfg)
	if err != nil {
		return nil, a.mapError(ctx, err, sink.Header())
	}
	t := a.newTranslator(req.Model)
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	for _, c := range t.deltas(resp) {
		msg.Content += c.Content
		msg.ReasoningContent += c.ReasoningContent
		for _, tc := range c.ToolCalls {
			tc.Index = nil
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	return &provider.Response{ChatCompletionResponse: openai.ChatCompletionResponse{
		ID: t.id, Object: "chat.completion", Created: t.created, Model: t.model,
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: finishReason(t.finish, t.calls > 0)}},
		Usage:   usage(t.usage),
	}}, nil
}

// ChatStream streams with streamGenerateContent (SSE). Gemini sends each function call
// whole, so a streamed tool call arrives as one delta with its full arguments.
func (a *Adapter) ChatStream(ctx context.Context, req openai.ChatCompletionRequest, fn provider.StreamFunc) (*provider.Response, error) {
	contents, cfg, err := toRequest(req)
	if err != nil {
		return nil, a.invalid(err)
	}
	ctx, sink := provider.WithHeaderSink(ctx)
	t := a.newTranslator(req.Model)
	var acc provider.Accumulator
	emit := func(c openai.ChatCompletionStreamResponse) error {
		acc.Add(c)
		if fn != nil {
			if err := fn(c); err != nil {
				return fmt.Errorf("stream callback: %w", err)
			}
		}
		return nil
	}
	if err := emit(t.chunk(openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}, "")); err != nil {
		return nil, err
	}
	for resp, err := range a.client.Models.GenerateContentStream(ctx, req.Model, contents, cfg) {
		if err != nil {
			return nil, a.mapError(ctx, err, sink.Header())
		}
		for _, d := range t.deltas(resp) {
			if err := emit(t.chunk(d, "")); err != nil {
				return nil, err
			}
		}
	}
	if err := emit(t.chunk(openai.ChatCompletionStreamChoiceDelta{}, finishReason(t.finish, t.calls > 0))); err != nil {
		return nil, err
	}
	u := usage(t.usage)
	last := t.chunk(openai.ChatCompletionStreamChoiceDelta{}, "")
	last.Choices, last.Usage = []openai.ChatCompletionStreamChoice{}, &u
	if err := emit(last); err != nil {
		return nil, err
	}
	return &provider.Response{ChatCompletionResponse: acc.Response()}, nil
}

// translator carries what spans the chunks of one answer: the tool call count (for ids
// and indexes), the finish reason and the latest usage (Gemini's is cumulative).
type translator struct {
	id, model string
	created   int64
	calls     int
	finish    genai.FinishReason
	usage     *genai.GenerateContentResponseUsageMetadata
}

func (a *Adapter) newTranslator(model string) *translator {
	return &translator{model: model, created: a.now().Unix()}
}

func (t *translator) chunk(d openai.ChatCompletionStreamChoiceDelta, finish openai.FinishReason) openai.ChatCompletionStreamResponse {
	return openai.ChatCompletionStreamResponse{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model,
		Choices: []openai.ChatCompletionStreamChoice{{Index: 0, Delta: d, FinishReason: finish}}}
}

// deltas reads one response (whole or streamed piece) of the first candidate.
func (t *translator) deltas(resp *genai.GenerateContentResponse) []openai.ChatCompletionStreamChoiceDelta {
	if resp.ResponseID != "" {
		t.id = resp.ResponseID
	}
	if resp.ModelVersion != "" {
		t.model = resp.ModelVersion
	}
	if resp.UsageMetadata != nil {
		t.usage = resp.UsageMetadata
	}
	if len(resp.Candidates) == 0 {
		return nil
	}
	c := resp.Candidates[0]
	if c.FinishReason != "" {
		t.finish = c.FinishReason
	}
	if c.Content == nil {
		return nil
	}
	var out []openai.ChatCompletionStreamChoiceDelta
	for _, p := range c.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			idx := t.calls
			t.calls++
			out = append(out, openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{
				Index: &idx, ID: toolCallID(idx, p.FunctionCall.Name, p.ThoughtSignature), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: p.FunctionCall.Name, Arguments: callArgs(p.FunctionCall)},
			}}})
		case p.Thought && p.Text != "":
			out = append(out, openai.ChatCompletionStreamChoiceDelta{ReasoningContent: p.Text})
		case p.Text != "":
			out = append(out, openai.ChatCompletionStreamChoiceDelta{Content: p.Text})
		}
	}
	return out
}

// invalid reports a request that cannot be translated: sending it again will not help.
func (a *Adapter) invalid(err error) error {
	return &provider.Error{Kind: provider.Gemini, Code: "invalid_request", Message: provider.Redact(err.Error(), a.apiKey)}
}

// mapError turns a genai error into *provider.Error; a cancelled context stays a context
// error, because the caller gave up and must not be retried.
func (a *Adapter) mapError(ctx context.Context, err error, h http.Header) error {
	if ctx.Err() != nil {
		return fmt.Errorf("gemini: %w", ctx.Err())
	}
	pe := &provider.Error{Kind: provider.Gemini, RetryAfter: provider.RetryAfter(h)}
	var apiErr genai.APIError
	var apiErrPtr *genai.APIError
	if errors.As(err, &apiErrPtr) && apiErrPtr != nil {
		apiErr, err = *apiErrPtr, nil
	}
	switch {
	case err == nil || errors.As(err, &apiErr):
		pe.Status = apiErr.Code
		pe.Code = cmp.Or(apiErr.Status, http.StatusText(apiErr.Code))
		pe.Message = apiErr.Message
		pe.Retryable = provider.StatusRetryable(apiErr.Code)
		if d := retryDelay(apiErr.Details); d > 0 {
			pe.RetryAfter = d
		}
	case provider.IsNetwork(err):
		pe.Code, pe.Message, pe.Retryable = "network_error", err.Error(), true
	default:
		pe.Code, pe.Message = "invalid_request", err.Error()
	}
	pe.Message = provider.Redact(pe.Message, a.apiKey)
	pe.Code = provider.Redact(pe.Code, a.apiKey)
	return pe
}

// retryDelay reads google.rpc.RetryInfo from an error's details: Gemini says how long to
// wait there ("retryDelay": "2s"), not in a Retry-After header.
func retryDelay(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		if s, ok := d["retryDelay"].(string); ok {
			if dur, err := time.ParseDuration(s); err == nil {
				return dur
			}
		}
	}
	return 0
}
