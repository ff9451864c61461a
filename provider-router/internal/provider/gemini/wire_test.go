package gemini_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

// wire is a fake Gemini API: POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent?alt=sse, in the documented JSON of
// https://ai.google.dev/api/generate-content (candidates, content.parts, functionCall,
// functionResponse, usageMetadata) and google.rpc.Status errors.
type wire struct{}

type part struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string         `json:"id"`
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse"`
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

func (wire) Decode(r *http.Request, body []byte) (providertest.Request, error) {
	path, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if r.Method != http.MethodPost || !ok {
		return providertest.Request{}, fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	model, method, _ := strings.Cut(path, ":")
	out := providertest.Request{APIKey: r.Header.Get("x-goog-api-key"), Model: model}
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		if r.URL.Query().Get("alt") != "sse" {
			return out, fmt.Errorf("streaming without alt=sse")
		}
		out.Stream = true
	default:
		return out, fmt.Errorf("unexpected method %q", method)
	}
	if r.URL.Query().Get("key") != "" {
		return out, fmt.Errorf("the key belongs in x-goog-api-key, not the URL (it would end up in logs)")
	}
	var in struct {
		Contents          []content `json:"contents"`
		SystemInstruction *content  `json:"systemInstruction"`
		GenerationConfig  struct {
			Temperature        *float64        `json:"temperature"`
			MaxOutputTokens    int             `json:"maxOutputTokens"`
			StopSequences      []string        `json:"stopSequences"`
			ResponseMimeType   string          `json:"responseMimeType"`
			ResponseJsonSchema json.RawMessage `json:"responseJsonSchema"`
		} `json:"generationConfig"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Description          string          `json:"description"`
				ParametersJsonSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig *struct {
			FunctionCallingConfig struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return out, err
	}
	gc := in.GenerationConfig
	out.Temperature, out.MaxTokens, out.Stop = gc.Temperature, gc.MaxOutputTokens, gc.StopSequences
	if gc.ResponseMimeType == "application/json" {
		out.JSON = "json_object"
		if len(gc.ResponseJsonSchema) > 0 {
			out.JSON, out.JSONSchema = "json_schema", gc.ResponseJsonSchema
		}
	}
	if si := in.SystemInstruction; si != nil {
		var texts []string
		for _, p := range si.Parts {
			texts = append(texts, p.Text)
		}
		out.System = strings.Join(texts, "\n")
	}
	for i, c := range in.Contents {
		if c.Role != "user" && c.Role != "model" {
			return out, fmt.Errorf("content %d: role %q", i, c.Role)
		}
		var m providertest.Message
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				if c.Role != "user" {
					return out, fmt.Errorf("functionResponse in a %s turn", c.Role)
				}
				if p.FunctionResponse.Response == nil {
					return out, fmt.Errorf("functionResponse.response must be an object")
				}
				m.Role = "tool"
				res := p.FunctionResponse.Response
				text, ok := res["result"].(string)
				if !ok || len(res) != 1 {
					b, _ := json.Marshal(res)
					text = string(b)
				}
				m.ToolResults = append(m.ToolResults, providertest.ToolResult{Name: p.FunctionResponse.Name, Content: text})
			case p.FunctionCall != nil:
				m.Role = "assistant"
				m.ToolCalls = append(m.ToolCalls, providertest.ToolCall{Name: p.FunctionCall.Name, Arguments: string(p.FunctionCall.Args)})
			default:
				m.Role = map[string]string{"user": "user", "model": "assistant"}[c.Role]
				m.Text = strings.TrimPrefix(m.Text+"\n"+p.Text, "\n")
			}
		}
		out.Messages = append(out.Messages, m)
	}
	for _, t := range in.Tools {
		for _, fd := range t.FunctionDeclarations {
			out.Tools = append(out.Tools, providertest.Tool{Name: fd.Name, Description: fd.Description, Parameters: fd.ParametersJsonSchema})
		}
	}
	if tc := in.ToolConfig; tc != nil {
		fc := tc.FunctionCallingConfig
		out.ToolChoice = map[string]string{"AUTO": "auto", "ANY": "required", "NONE": "none"}[fc.Mode]
		if fc.Mode == "ANY" && len(fc.AllowedFunctionNames) == 1 {
			out.ToolChoice = "function:" + fc.AllowedFunctionNames[0]
		}
	}
	return out, nil
}

func finishReason(f openai.FinishReason) string {
	if f == openai.FinishReasonLength {
		return "MAX_TOKENS"
	}
	return "STOP" // Gemini finishes function calls with STOP too
}

func usageJSON(u providertest.Usage) map[string]any {
	return map[string]any{"promptTokenCount": u.Prompt, "candidatesTokenCount": u.Completion,
		"totalTokenCount": u.Prompt + u.Completion, "cachedContentTokenCount": u.Cached}
}

func callParts(sc providertest.Scenario) []any {
	var parts []any
	for _, tc := range sc.ToolCalls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": json.RawMessage(tc.Arguments)}})
	}
	return parts
}

func response(req providertest.Request, parts []any, finish string, usage map[string]any) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	r := map[string]any{"candidates": []any{cand}, "modelVersion": req.Model, "responseId": "resp-1"}
	if usage != nil {
		r["usageMetadata"] = usage
	}
	return r
}

func (wire) Answer(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	if !req.Stream {
		var parts []any
		if sc.Text != "" {
			parts = append(parts, map[string]any{"text": sc.Text})
		}
		parts = append(parts, callParts(sc)...)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response(req, parts, finishReason(sc.Finish), usageJSON(sc.Usage)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		w.(http.Flusher).Flush()
	}
	// Every chunk carries the usage so far; the last one the totals and the finish reason.
	partial := map[string]any{"promptTokenCount": sc.Usage.Prompt, "totalTokenCount": sc.Usage.Prompt}
	for _, c := range sc.Chunks() {
		send(response(req, []any{map[string]any{"text": c}}, "", partial))
	}
	send(response(req, callParts(sc), finishReason(sc.Finish), usageJSON(sc.Usage)))
}

func (wire) Fail(w http.ResponseWriter, _ providertest.Request, sc providertest.Scenario) {
	status := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[sc.Status]
	details := []any{}
	if sc.RetryAfter > 0 {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": sc.RetryAfter.String()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(sc.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": sc.Status, "message": sc.ErrorMessage, "status": status, "details": details}})
}
