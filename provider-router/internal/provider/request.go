package provider

import (
	"cmp"
	"encoding/json"
	"fmt"

	openai "github.com/sashabaranov/go-openai"
)

// ToolChoiceMode is the provider-neutral reading of an OpenAI tool_choice.
type ToolChoiceMode string

// The tool_choice modes every adapter translates.
const (
	ToolChoiceUnset    ToolChoiceMode = ""         // not given: the provider's default (auto when tools are present)
	ToolChoiceAuto     ToolChoiceMode = "auto"     // the model decides
	ToolChoiceRequired ToolChoiceMode = "required" // the model must call some tool
	ToolChoiceNone     ToolChoiceMode = "none"     // the model must not call a tool
	ToolChoiceFunction ToolChoiceMode = "function" // the model must call the named function
)

// ParseToolChoice reads req.ToolChoice, which is a string ("auto", "required", "none"),
// an openai.ToolChoice (by value or pointer) when built in Go, or a map when the router
// decoded the executor's JSON into an `any`. It returns the mode and, for
// ToolChoiceFunction, the function name.
func ParseToolChoice(v any) (ToolChoiceMode, string, error) {
	switch tc := v.(type) {
	case nil:
		return ToolChoiceUnset, "", nil
	case string:
		switch ToolChoiceMode(tc) {
		case ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
			return ToolChoiceMode(tc), "", nil
		case ToolChoiceUnset:
			return ToolChoiceUnset, "", nil
		}
		return "", "", fmt.Errorf("unknown tool_choice %q", tc)
	case openai.ToolChoice:
		return ToolChoiceFunction, tc.Function.Name, nil
	case *openai.ToolChoice:
		if tc == nil {
			return ToolChoiceUnset, "", nil
		}
		return ToolChoiceFunction, tc.Function.Name, nil
	default:
		// A decoded JSON object or any other struct: go through JSON once.
		raw, err := json.Marshal(tc)
		if err != nil {
			return "", "", fmt.Errorf("reading tool_choice: %w", err)
		}
		var c openai.ToolChoice
		if err := json.Unmarshal(raw, &c); err != nil || c.Function.Name == "" {
			return "", "", fmt.Errorf("unsupported tool_choice %s", raw)
		}
		return ToolChoiceFunction, c.Function.Name, nil
	}
}

// SchemaJSON returns a JSON schema (a tool's parameters or a response_format schema) as
// raw JSON, whatever Go type carried it: json.RawMessage, a map, a jsonschema.Definition.
// A missing schema becomes the empty object schema, which every provider accepts.
func SchemaJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 || string(raw) == "null" {
			return SchemaJSON(nil)
		}
		return raw, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	if string(raw) == "null" {
		return SchemaJSON(nil)
	}
	return raw, nil
}

// SchemaMap is SchemaJSON decoded into a map, for SDKs that take schemas as maps.
func SchemaMap(v any) (map[string]any, error) {
	raw, err := SchemaJSON(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("schema is not a JSON object: %w", err)
	}
	return m, nil
}

// MessageText returns a message's text, joining the text parts of a multi-part message.
// Adapters of providers that take images translate MultiContent themselves.
func MessageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var s string
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			s += p.Text
		}
	}
	return s
}

// MaxTokens returns the completion-token cap of a request: max_completion_tokens (the
// newer field) when set, else max_tokens, else 0 for "not given".
func MaxTokens(req openai.ChatCompletionRequest) int {
	return cmp.Or(req.MaxCompletionTokens, req.MaxTokens)
}
