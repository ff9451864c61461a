package anthropic_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

// wire is a fake Messages API (POST /v1/messages) answering in the documented JSON and SSE
// forms of https://docs.anthropic.com/en/api/messages and .../messages-streaming.
type wire struct{}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// blocks reads a content field, which is a string or an array of blocks.
func blocks(raw json.RawMessage) ([]block, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}, nil
	}
	var bs []block
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

func joinText(bs []block) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (wire) Decode(r *http.Request, body []byte) (providertest.Request, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		return providertest.Request{}, fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	if r.Header.Get("anthropic-version") == "" {
		return providertest.Request{}, fmt.Errorf("anthropic-version header missing")
	}
	if r.Header.Get("Authorization") != "" {
		return providertest.Request{}, fmt.Errorf("the key goes in x-api-key, not Authorization")
	}
	var in struct {
		Model         string          `json:"model"`
		MaxTokens     *int            `json:"max_tokens"`
		System        json.RawMessage `json:"system"`
		Temperature   *float64        `json:"temperature"`
		StopSequences []string        `json:"stop_sequences"`
		Stream        bool            `json:"stream"`
		Messages      []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tool_choice"`
		OutputConfig *struct {
			Format *struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return providertest.Request{}, err
	}
	if in.MaxTokens == nil {
		return providertest.Request{}, fmt.Errorf("max_tokens is required")
	}
	out := providertest.Request{
		APIKey: r.Header.Get("x-api-key"), Model: in.Model, Stream: in.Stream,
		MaxTokens: *in.MaxTokens, Temperature: in.Temperature, Stop: in.StopSequences,
	}
	if len(in.System) > 0 {
		sys, err := blocks(in.System)
		if err != nil {
			return out, fmt.Errorf("system: %w", err)
		}
		out.System = joinText(sys)
	}
	// The adapter asks for json_object by instruction (Anthropic has no JSON mode).
	if strings.Contains(out.System, "single valid JSON object") {
		out.JSON = "json_object"
		out.System = strings.TrimSpace(strings.Split(out.System, "Respond with a single valid JSON object")[0])
	}
	if oc := in.OutputConfig; oc != nil && oc.Format != nil {
		out.JSON, out.JSONSchema = oc.Format.Type, oc.Format.Schema
	}
	last := ""
	for i, m := range in.Messages {
		if m.Role == last {
			return out, fmt.Errorf("message %d: roles must alternate", i)
		}
		last = m.Role
		bs, err := blocks(m.Content)
		if err != nil {
			return out, fmt.Errorf("message %d: %w", i, err)
		}
		var cur providertest.Message
		flush := func() {
			if cur.Role != "" {
				out.Messages = append(out.Messages, cur)
			}
			cur = providertest.Message{}
		}
		for _, b := range bs {
			switch b.Type {
			case "text":
				if cur.Role == "tool" {
					flush()
				}
				cur.Role = m.Role
				cur.Text = strings.TrimPrefix(cur.Text+"\n"+b.Text, "\n")
			case "tool_use":
				cur.Role = m.Role
				cur.ToolCalls = append(cur.ToolCalls, providertest.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
			case "tool_result":
				if m.Role != "user" {
					return out, fmt.Errorf("tool_result in a %s turn", m.Role)
				}
				if cur.Role == "user" {
					return out, fmt.Errorf("tool_result blocks must come first in a user turn")
				}
				cur.Role = "tool"
				inner, err := blocks(b.Content)
				if err != nil {
					return out, fmt.Errorf("tool_result content: %w", err)
				}
				cur.ToolResults = append(cur.ToolResults, providertest.ToolResult{CallID: b.ToolUseID, Content: joinText(inner)})
			default:
				return out, fmt.Errorf("unexpected block type %q", b.Type)
			}
		}
		flush()
	}
	for _, t := range in.Tools {
		out.Tools = append(out.Tools, providertest.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if tc := in.ToolChoice; tc != nil {
		out.ToolChoice = map[string]string{"auto": "auto", "any": "required", "none": "none", "tool": "function:" + tc.Name}[tc.Type]
	}
	return out, nil
}

func stopReason(f openai.FinishReason) string {
	return map[openai.FinishReason]string{
		openai.FinishReasonStop: "end_turn", openai.FinishReasonLength: "max_tokens", openai.FinishReasonToolCalls: "tool_use",
	}[f]
}

func usageJSON(u providertest.Usage) map[string]any {
	return map[string]any{"input_tokens": u.Prompt - u.Cached, "output_tokens": u.Completion,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": u.Cached}
}

func rateLimitHeaders(w http.ResponseWriter, sc providertest.Scenario) {
	if !sc.RateLimit.Known {
		return
	}
	h := w.Header()
	h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(sc.RateLimit.LimitRequests))
	h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(sc.RateLimit.RemainingRequests))
	h.Set("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z")
	h.Set("anthropic-ratelimit-tokens-limit", strconv.Itoa(sc.RateLimit.LimitTokens))
	h.Set("anthropic-ratelimit-tokens-remaining", strconv.Itoa(sc.RateLimit.RemainingTokens))
	h.Set("anthropic-ratelimit-tokens-reset", "2030-01-01T00:00:00Z")
}

func (wire) Answer(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	rateLimitHeaders(w, sc)
	if req.Stream {
		stream(w, req, sc)
		return
	}
	content := []any{}
	if sc.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": sc.Text})
	}
	for _, tc := range sc.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Arguments)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_01", "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stopReason(sc.Finish), "stop_sequence": nil, "usage": usageJSON(sc.Usage),
	})
}

func stream(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	u := usageJSON(sc.Usage)
	start := map[string]any{"input_tokens": u["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": u["cache_read_input_tokens"]}
	send("message_start", map[string]any{"message": map[string]any{"id": "msg_01", "type": "message", "role": "assistant",
		"content": []any{}, "model": req.Model, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	idx := 0
	if chunks := sc.Chunks(); len(chunks) > 0 {
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		send("ping", map[string]any{})
		for _, c := range chunks {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": c}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for _, tc := range sc.ToolCalls {
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, part := range providertest.SplitArguments(tc.Arguments, 3) {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(sc.Finish), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": sc.Usage.Completion}})
	send("message_stop", map[string]any{})
}

func (wire) Fail(w http.ResponseWriter, _ providertest.Request, sc providertest.Scenario) {
	typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[sc.Status]
	if typ == "" {
		typ = "api_error"
	}
	if sc.RetryAfter > 0 {
		w.Header().Set("retry-after", strconv.Itoa(int(sc.RetryAfter.Seconds())))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_01")
	w.WriteHeader(sc.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error",
		"error": map[string]any{"type": typ, "message": sc.ErrorMessage}, "request_id": "req_01"})
}
