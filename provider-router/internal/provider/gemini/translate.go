package gemini

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
	"google.golang.org/genai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Gemini's function calls carry no ids (the Gemini API leaves functionCall.id empty), but
// OpenAI callers need one to name in their tool result. The adapter derives
// "call_<index>_<name>" from the call's position in the answer, so the same answer always
// gets the same ids (a replayed journal matches). Gemini 3 models also require each
// function call's thoughtSignature back on the next turn and OpenAI's form has no field
// for it, so it rides inside the id after sigSep and is restored from there.
const sigSep = ".sig."

func toolCallID(index int, name string, signature []byte) string {
	id := "call_" + strconv.Itoa(index) + "_" + name
	if len(signature) > 0 {
		id += sigSep + base64.RawURLEncoding.EncodeToString(signature)
	}
	return id
}

// signatureFromID returns the thought signature carried in an id made by toolCallID.
func signatureFromID(id string) []byte {
	_, enc, ok := strings.Cut(id, sigSep)
	if !ok {
		return nil
	}
	sig, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil
	}
	return sig
}

// toRequest translates an OpenAI request into Gemini contents and config.
func toRequest(req openai.ChatCompletionRequest) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	cfg := &genai.GenerateContentConfig{}
	if n := provider.MaxTokens(req); n > 0 {
		cfg.MaxOutputTokens = int32(n)
	}
	if req.Temperature != 0 {
		cfg.Temperature = genai.Ptr(req.Temperature)
	}
	if req.TopP != 0 {
		cfg.TopP = genai.Ptr(req.TopP)
	}
	if req.Seed != nil {
		cfg.Seed = genai.Ptr(int32(*req.Seed))
	}
	cfg.StopSequences = req.Stop

	var system []*genai.Part
	var contents []*genai.Content
	// functionResponse parts must name the function; OpenAI tool messages name only the
	// call id, so remember which function each id called.
	names := map[string]string{}
	add := func(role string, parts ...*genai.Part) {
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
			system = append(system, &genai.Part{Text: provider.MessageText(m)})
		case openai.ChatMessageRoleUser:
			parts, err := userParts(m)
			if err != nil {
				return nil, nil, err
			}
			add(genai.RoleUser, parts...)
		case openai.ChatMessageRoleAssistant:
			var parts []*genai.Part
			if text := provider.MessageText(m); text != "" {
				parts = append(parts, &genai.Part{Text: text})
			}
			for _, tc := range m.ToolCalls {
				args := map[string]any{}
				if s := strings.TrimSpace(tc.Function.Arguments); s != "" {
					if err := json.Unmarshal([]byte(s), &args); err != nil {
						return nil, nil, fmt.Errorf("tool call %s: arguments are not a JSON object: %w", tc.ID, err)
					}
				}
				names[tc.ID] = tc.Function.Name
				parts = append(parts, &genai.Part{
					FunctionCall:     &genai.FunctionCall{Name: tc.Function.Name, Args: args},
					ThoughtSignature: signatureFromID(tc.ID),
				})
			}
			if len(parts) > 0 {
				add(genai.RoleModel, parts...)
			}
		case openai.ChatMessageRoleTool:
			name := cmp.Or(names[m.ToolCallID], m.Name)
			if name == "" {
				return nil, nil, fmt.Errorf("tool result %q answers no known tool call", m.ToolCallID)
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				Name: name, Response: functionResponse(provider.MessageText(m))}})
		default:
			return nil, nil, fmt.Errorf("unsupported message role %q", m.Role)
		}
	}
	if len(system) > 0 {
		cfg.SystemInstruction = &genai.Content{Parts: system}
	}

	var decls []*genai.FunctionDeclaration
	for _, t := range req.Tools {
		if t.Type != openai.ToolTypeFunction || t.Function == nil {
			return nil, nil, fmt.Errorf("unsupported tool type %q: only function tools translate", t.Type)
		}
		schema, err := provider.SchemaJSON(t.Function.Parameters)
		if err != nil {
			return nil, nil, fmt.Errorf("tool %s: %w", t.Function.Name, err)
		}
		// parametersJsonSchema takes standard JSON Schema as is; the older Schema type
		// would need a lossy conversion.
		decls = append(decls, &genai.FunctionDeclaration{Name: t.Function.Name, Description: t.Function.Description,
			ParametersJsonSchema: schema})
	}
	if len(decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	mode, name, err := provider.ParseToolChoice(req.ToolChoice)
	if err != nil {
		return nil, nil, err
	}
	fc := &genai.FunctionCallingConfig{}
	switch mode {
	case provider.ToolChoiceAuto:
		fc.Mode = genai.FunctionCallingConfigModeAuto
	case provider.ToolChoiceRequired:
		fc.Mode = genai.FunctionCallingConfigModeAny
	case provider.ToolChoiceNone:
		fc.Mode = genai.FunctionCallingConfigModeNone
	case provider.ToolChoiceFunction:
		fc.Mode, fc.AllowedFunctionNames = genai.FunctionCallingConfigModeAny, []string{name}
	}
	if fc.Mode != "" {
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: fc}
	}

	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case openai.ChatCompletionResponseFormatTypeJSONObject:
			cfg.ResponseMIMEType = "application/json"
		case openai.ChatCompletionResponseFormatTypeJSONSchema:
			if rf.JSONSchema == nil {
				return nil, nil, fmt.Errorf("response_format json_schema without a schema")
			}
			schema, err := provider.SchemaJSON(rf.JSONSchema.Schema)
			if err != nil {
				return nil, nil, fmt.Errorf("response_format: %w", err)
			}
			cfg.ResponseMIMEType = "application/json"
			cfg.ResponseJsonSchema = schema
		}
	}
	return contents, cfg, nil
}

// functionResponse makes a tool's output the JSON object Gemini requires: a JSON object
// result is passed as is, anything else is wrapped as {"result": <text>}.
func functionResponse(text string) map[string]any {
	var obj map[string]any
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		return obj
	}
	return map[string]any{"result": text}
}

func userParts(m openai.ChatCompletionMessage) ([]*genai.Part, error) {
	if len(m.MultiContent) == 0 {
		return []*genai.Part{{Text: m.Content}}, nil
	}
	var parts []*genai.Part
	for _, p := range m.MultiContent {
		switch p.Type {
		case openai.ChatMessagePartTypeText:
			parts = append(parts, &genai.Part{Text: p.Text})
		case openai.ChatMessagePartTypeImageURL:
			if p.ImageURL == nil {
				continue
			}
			rest, ok := strings.CutPrefix(p.ImageURL.URL, "data:")
			if !ok {
				// Gemini fetches only its own file URIs; remote URLs must be inlined
				// by the caller.
				return nil, fmt.Errorf("gemini: image URLs must be data: URLs")
			}
			meta, data, found := strings.Cut(rest, ",")
			if !found || !strings.HasSuffix(meta, ";base64") {
				return nil, fmt.Errorf("gemini: image data URL is not base64")
			}
			raw, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, fmt.Errorf("gemini: image data: %w", err)
			}
			parts = append(parts, &genai.Part{InlineData: &genai.Blob{MIMEType: strings.TrimSuffix(meta, ";base64"), Data: raw}})
		default:
			return nil, fmt.Errorf("unsupported content part %q", p.Type)
		}
	}
	return parts, nil
}

// finishReason maps Gemini's finishReason; an answer with function calls finishes with
// tool_calls whatever Gemini says (it says STOP).
func finishReason(r genai.FinishReason, hasCalls bool) openai.FinishReason {
	switch {
	case hasCalls:
		return openai.FinishReasonToolCalls
	case r == "":
		return ""
	case r == genai.FinishReasonStop:
		return openai.FinishReasonStop
	case r == genai.FinishReasonMaxTokens:
		return openai.FinishReasonLength
	case r == genai.FinishReasonSafety, r == genai.FinishReasonRecitation, r == genai.FinishReasonBlocklist,
		r == genai.FinishReasonProhibitedContent, r == genai.FinishReasonSPII, r == genai.FinishReasonImageSafety:
		return openai.FinishReasonContentFilter
	default:
		return openai.FinishReasonStop
	}
}

// usage maps usageMetadata: promptTokenCount already includes cached tokens; thinking
// tokens are billed as output, so they count as completion tokens (and reasoning tokens).
func usage(u *genai.GenerateContentResponseUsageMetadata) openai.Usage {
	if u == nil {
		return openai.Usage{}
	}
	prompt := int(u.PromptTokenCount + u.ToolUsePromptTokenCount)
	completion := int(u.CandidatesTokenCount + u.ThoughtsTokenCount)
	out := openai.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    completion,
		TotalTokens:         prompt + completion,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: int(u.CachedContentTokenCount)},
	}
	if u.ThoughtsTokenCount > 0 {
		out.CompletionTokensDetails = &openai.CompletionTokensDetails{ReasoningTokens: int(u.ThoughtsTokenCount)}
	}
	return out
}

// callArgs encodes a function call's arguments as OpenAI's JSON string.
func callArgs(fc *genai.FunctionCall) string {
	if len(fc.Args) == 0 {
		return "{}"
	}
	b, err := json.Marshal(fc.Args)
	if err != nil {
		return "{}"
	}
	return string(b)
}
