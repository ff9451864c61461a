package openaicompat_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

// wire is a fake Chat Completions endpoint (POST {base}/chat/completions), answering in the
// documented JSON and SSE forms of https://platform.openai.com/docs/api-reference/chat.
type wire struct{}

func (wire) Decode(r *http.Request, body []byte) (providertest.Request, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		return providertest.Request{}, fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	var in openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return providertest.Request{}, err
	}
	out := providertest.Request{
		APIKey:    strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		Model:     in.Model,
		Stream:    in.Stream,
		MaxTokens: max(in.MaxTokens, in.MaxCompletionTokens),
		Stop:      in.Stop,
	}
	if in.Stream && (in.StreamOptions == nil || !in.StreamOptions.IncludeUsage) {
		return out, fmt.Errorf("streaming without stream_options.include_usage: usage would be lost")
	}
	var raw struct {
		Temperature *float64 `json:"temperature"`
		ToolChoice  any      `json:"tool_choice"`
	}
	_ = json.Unmarshal(body, &raw)
	out.Temperature = raw.Temperature
	switch tc := raw.ToolChoice.(type) {
	case string:
		out.ToolChoice = tc
	case map[string]any:
		fn, _ := tc["function"].(map[string]any)
		out.ToolChoice = fmt.Sprintf("function:%v", fn["name"])
	}
	names := map[string]string{}
	for _, m := range in.Messages {
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
			out.System = strings.TrimPrefix(out.System+"\n"+m.Content, "\n")
		case openai.ChatMessageRoleTool:
			res := providertest.ToolResult{CallID: m.ToolCallID, Name: names[m.ToolCallID], Content: m.Content}
			if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == "tool" {
				out.Messages[n-1].ToolResults = append(out.Messages[n-1].ToolResults, res)
			} else {
				out.Messages = append(out.Messages, providertest.Message{Role: "tool", ToolResults: []providertest.ToolResult{res}})
			}
		default:
			msg := providertest.Message{Role: m.Role, Text: m.Content}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				msg.ToolCalls = append(msg.ToolCalls, providertest.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			out.Messages = append(out.Messages, msg)
		}
	}
	for _, t := range in.Tools {
		params, _ := json.Marshal(t.Function.Parameters)
		out.Tools = append(out.Tools, providertest.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type != openai.ChatCompletionResponseFormatTypeText {
		out.JSON = string(rf.Type)
		if rf.JSONSchema != nil && rf.JSONSchema.Schema != nil {
			out.JSONSchema, _ = rf.JSONSchema.Schema.MarshalJSON()
		}
	}
	return out, nil
}

func usageJSON(u providertest.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":         u.Prompt,
		"completion_tokens":     u.Completion,
		"total_tokens":          u.Prompt + u.Completion,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached},
	}
}

func rateLimitHeaders(w http.ResponseWriter, sc providertest.Scenario) {
	if !sc.RateLimit.Known {
		return
	}
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(sc.RateLimit.LimitRequests))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(sc.RateLimit.RemainingRequests))
	h.Set("x-ratelimit-limit-tokens", strconv.Itoa(sc.RateLimit.LimitTokens))
	h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(sc.RateLimit.RemainingTokens))
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
}

func (wire) Answer(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	rateLimitHeaders(w, sc)
	if req.Stream {
		stream(w, req, sc)
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if sc.Text != "" {
		msg["content"] = sc.Text
	}
	var calls []map[string]any
	for _, tc := range sc.ToolCalls {
		calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": string(sc.Finish)}},
		"usage":   usageJSON(sc.Usage),
	})
}

func stream(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(choices []any, usage any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk",
			"created": 1700000000, "model": req.Model, "choices": choices, "usage": usage})
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	for _, c := range sc.Chunks() {
		send(delta(map[string]any{"content": c}, nil), nil)
	}
	for i, tc := range sc.ToolCalls {
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil), nil)
		for _, part := range providertest.SplitArguments(tc.Arguments, 3) {
			send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": part}}}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, string(sc.Finish)), nil)
	send([]any{}, usageJSON(sc.Usage))
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
}

func (wire) Fail(w http.ResponseWriter, _ providertest.Request, sc providertest.Scenario) {
	code, typ := "server_error", "server_error"
	switch sc.Status {
	case http.StatusTooManyRequests:
		code, typ = "rate_limit_exceeded", "requests"
	case http.StatusUnauthorized:
		code, typ = "invalid_api_key", "invalid_request_error"
	case http.StatusBadRequest, http.StatusNotFound, http.StatusForbidden:
		code, typ = "invalid_request", "invalid_request_error"
	}
	if sc.RetryAfter > 0 {
		w.Header().Set("retry-after-ms", strconv.FormatInt(sc.RetryAfter.Milliseconds(), 10))
		w.Header().Set("Retry-After", strconv.Itoa(int(sc.RetryAfter.Seconds())))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(sc.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": sc.ErrorMessage, "type": typ, "param": nil, "code": code}})
}
