package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// DefaultMaxTokens is sent when the request names no cap: the Messages API requires one.
const DefaultMaxTokens = 1024

// jsonObjectInstruction is appended to the system prompt for response_format json_object.
// Anthropic's structured outputs need a schema, and json_object has none; an assistant
// prefill of "{" would also work but newer models reject prefills, so an instruction it is.
const jsonObjectInstruction = "Respond with a single valid JSON object and nothing else: no prose, no code fences."

// toParams translates an OpenAI Chat Completions request into Messages API parameters.
func toParams(req openai.ChatCompletionRequest) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: int64(max(provider.MaxTokens(req), 0)),
	}
	if p.MaxTokens == 0 {
		p.MaxTokens = DefaultMaxTokens
	}
	// OpenAI's temperature runs 0..2, Anthropic's 0..1: clamp rather than be refused.
	if req.Temperature != 0 {
		p.Temperature = sdk.Float(min(float64(req.Temperature), 1))
	}
	if req.TopP != 0 {
		p.TopP = sdk.Float(float64(req.TopP))
	}
	p.StopSequences = req.Stop

	var system []string
	for _, m := range req.Messages {
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
			system = append(system, provider.MessageText(m))
		case openai.ChatMessageRoleUser:
			blocks, err := userBlocks(m)
			if err != nil {
				return p, err
			}
			p.Messages = appendMessage(p.Messages, sdk.MessageParamRoleUser, blocks)
		case openai.ChatMessageRoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if text := provider.MessageText(m); text != "" {
				blocks = append(blocks, sdk.NewTextBlock(text))
			}
			for _, tc := range m.ToolCalls {
				args := strings.TrimSpace(tc.Function.Arguments)
				if args == "" {
					args = "{}"
				}
				if !json.Valid([]byte(args)) {
					return p, fmt.Errorf("tool call %s: arguments are not JSON", tc.ID)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, json.RawMessage(args), tc.Function.Name))
			}
			if len(blocks) == 0 {
				continue // an empty assistant turn is refused by the API and says nothing
			}
			p.Messages = appendMessage(p.Messages, sdk.MessageParamRoleAssistant, blocks)
		case openai.ChatMessageRoleTool:
			// Tool results travel as tool_result blocks of a user turn; consecutive
			// results share one turn (appendMessage merges them).
			p.Messages = appendMessage(p.Messages, sdk.MessageParamRoleUser,
				[]sdk.ContentBlockParamUnion{sdk.NewToolResultBlock(m.ToolCallID, provider.MessageText(m), false)})
		default:
			return p, fmt.Errorf("unsupported message role %q", m.Role)
		}
	}

	for _, t := range req.Tools {
		if t.Type != openai.ToolTypeFunction || t.Function == nil {
			return p, fmt.Errorf("unsupported tool type %q: only function tools translate", t.Type)
		}
		schema, err := inputSchema(t.Function.Parameters)
		if err != nil {
			return p, fmt.Errorf("tool %s: %w", t.Function.Name, err)
		}
		tp := &sdk.ToolParam{Name: t.Function.Name, InputSchema: schema}
		if t.Function.Description != "" {
			tp.Description = sdk.String(t.Function.Description)
		}
		if t.Function.Strict {
			tp.Strict = sdk.Bool(true)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}

	mode, name, err := provider.ParseToolChoice(req.ToolChoice)
	if err != nil {
		return p, err
	}
	noParallel := isParallelFalse(req.ParallelToolCalls)
	switch mode {
	case provider.ToolChoiceAuto:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
	case provider.ToolChoiceRequired:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	case provider.ToolChoiceNone:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case provider.ToolChoiceFunction:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: name}}
	}
	if noParallel && len(p.Tools) > 0 {
		switch {
		case p.ToolChoice.OfAuto != nil:
			p.ToolChoice.OfAuto.DisableParallelToolUse = sdk.Bool(true)
		case p.ToolChoice.OfAny != nil:
			p.ToolChoice.OfAny.DisableParallelToolUse = sdk.Bool(true)
		case p.ToolChoice.OfTool != nil:
			p.ToolChoice.OfTool.DisableParallelToolUse = sdk.Bool(true)
		case p.ToolChoice.OfNone == nil:
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: sdk.Bool(true)}}
		}
	}

	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case openai.ChatCompletionResponseFormatTypeJSONSchema:
			if rf.JSONSchema == nil {
				return p, fmt.Errorf("response_format json_schema without a schema")
			}
			schema, err := provider.SchemaMap(rf.JSONSchema.Schema)
			if err != nil {
				return p, fmt.Errorf("response_format: %w", err)
			}
			p.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
		case openai.ChatCompletionResponseFormatTypeJSONObject:
			system = append(system, jsonObjectInstruction)
		}
	}
	for _, s := range system {
		if s != "" {
			p.System = append(p.System, sdk.TextBlockParam{Text: s})
		}
	}
	return p, nil
}

// isParallelFalse reports an explicit parallel_tool_calls: false, which arrives as a bool
// (built in Go) or a decoded JSON bool.
func isParallelFalse(v any) bool {
	b, ok := v.(bool)
	return ok && !b
}

// appendMessage adds blocks as a turn of role, merging into the previous turn when it has
// the same role: the API wants user and assistant to alternate, and OpenAI's one message
// per tool result becomes one user turn of tool_result blocks.
func appendMessage(ms []sdk.MessageParam, role sdk.MessageParamRole, blocks []sdk.ContentBlockParamUnion) []sdk.MessageParam {
	if n := len(ms); n > 0 && ms[n-1].Role == role {
		ms[n-1].Content = append(ms[n-1].Content, blocks...)
		return ms
	}
	return append(ms, sdk.MessageParam{Role: role, Content: blocks})
}

func userBlocks(m openai.ChatCompletionMessage) ([]sdk.ContentBlockParamUnion, error) {
	if len(m.MultiContent) == 0 {
		return []sdk.ContentBlockParamUnion{sdk.NewTextBlock(m.Content)}, nil
	}
	var blocks []sdk.ContentBlockParamUnion
	for _, part := range m.MultiContent {
		switch part.Type {
		case openai.ChatMessagePartTypeText:
			blocks = append(blocks, sdk.NewTextBlock(part.Text))
		case openai.ChatMessagePartTypeImageURL:
			if part.ImageURL == nil {
				continue
			}
			u := part.ImageURL.URL
			if rest, ok := strings.CutPrefix(u, "data:"); ok {
				// data:<media type>;base64,<data>
				meta, data, found := strings.Cut(rest, ",")
				if !found || !strings.HasSuffix(meta, ";base64") {
					return nil, fmt.Errorf("image data URL is not base64")
				}
				blocks = append(blocks, sdk.NewImageBlockBase64(strings.TrimSuffix(meta, ";base64"), data))
			} else {
				blocks = append(blocks, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: u}))
			}
		default:
			return nil, fmt.Errorf("unsupported content part %q", part.Type)
		}
	}
	return blocks, nil
}

// inputSchema carries a JSON schema whole into input_schema: properties and required in
// their fields, every other keyword ($defs, additionalProperties, ...) as extra fields.
func inputSchema(params any) (sdk.ToolInputSchemaParam, error) {
	m, err := provider.SchemaMap(params)
	if err != nil {
		return sdk.ToolInputSchemaParam{}, err
	}
	var s sdk.ToolInputSchemaParam
	extra := map[string]any{}
	for k, v := range m {
		switch k {
		case "type":
			// Always "object" for a tool's input; the SDK writes it.
		case "properties":
			s.Properties = v
		case "required":
			list, _ := v.([]any)
			for _, r := range list {
				if name, ok := r.(string); ok {
					s.Required = append(s.Required, name)
				}
			}
		default:
			extra[k] = v
		}
	}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	if len(extra) > 0 {
		s.ExtraFields = extra
	}
	return s, nil
}

// finishReason maps a stop_reason onto OpenAI's finish_reason.
func finishReason(r sdk.StopReason) openai.FinishReason {
	switch r {
	case sdk.StopReasonToolUse:
		return openai.FinishReasonToolCalls
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return openai.FinishReasonLength
	case sdk.StopReasonRefusal:
		return openai.FinishReasonContentFilter
	case "":
		return ""
	default: // end_turn, stop_sequence, pause_turn
		return openai.FinishReasonStop
	}
}

// usage maps Anthropic's usage onto OpenAI's, where prompt_tokens counts every input
// token: Anthropic reports fresh input, cache reads and cache writes separately.
func usage(input, cacheRead, cacheCreation, output int64) openai.Usage {
	prompt := int(input + cacheRead + cacheCreation)
	return openai.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    int(output),
		TotalTokens:         prompt + int(output),
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: int(cacheRead)},
	}
}

// fromMessage translates a Messages API answer into a ChatCompletion.
func fromMessage(m *sdk.Message, created int64) openai.ChatCompletionResponse {
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	var text, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			args := string(b.Input)
			if strings.TrimSpace(args) == "" || args == "null" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: b.Name, Arguments: args}})
		}
	}
	msg.Content = text.String()
	msg.ReasoningContent = reasoning.String()
	u := m.Usage
	return openai.ChatCompletionResponse{
		ID:      m.ID,
		Object:  "chat.completion",
		Created: created,
		Model:   string(m.Model),
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: finishReason(m.StopReason)}},
		Usage:   usage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens),
	}
}
