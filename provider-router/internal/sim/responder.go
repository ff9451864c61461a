package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// answer is the deterministic part of a response: everything but ids, timestamps and
// timing.
type answer struct {
	// pieces are the output tokens in stream order: the content, or the tool calls'
	// argument fragments. completion_tokens is len(pieces).
	pieces []string
	// toolCalls, when set, are the answer; callOf[i] is the call that pieces[i] belongs
	// to, and each call's Arguments are its pieces joined.
	toolCalls []openai.ToolCall
	callOf    []int
	finish    openai.FinishReason
	// promptTokens is the chars/4 estimate of the request.
	promptTokens int
	// digest identifies the request by what decides the answer (semanticDigest).
	digest [32]byte
}

func (a answer) content() string { return strings.Join(a.pieces, "") }

func (a answer) completionTokens() int { return len(a.pieces) }

// requestError is a request the simulator cannot answer; it becomes a 400.
type requestError struct {
	param   string
	message string
}

func (e *requestError) Error() string { return e.message }

// respond computes the answer to req from the request's semantics and the seed alone
// (model, messages, tools, tool_choice, response_format, seed), so the same request always
// gets byte-identical content. max_tokens is deliberately outside the hash and only
// truncates: a shorter max_tokens yields a prefix of the longer answer, as a real model
// cut off mid-answer would.
func respond(m *model, req *openai.ChatCompletionRequest, serverSeed int64) (answer, error) {
	seed := serverSeed
	if req.Seed != nil {
		seed = int64(*req.Seed)
	}
	digest, err := semanticDigest(req, seed)
	if err != nil {
		return answer{}, err
	}
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(digest[0:8]), binary.LittleEndian.Uint64(digest[8:16])))
	a := answer{promptTokens: estimatePromptTokens(req), digest: digest}

	tools := functionTools(req.Tools)
	call, forced, err := decideToolCall(req, tools)
	if err != nil {
		return answer{}, err
	}
	g := &generator{rng: rng, userWords: lastUserWords(req.Messages)}
	switch {
	case call:
		tool := forced
		if tool == nil {
			tool = tools[rng.IntN(len(tools))]
		}
		args, err := json.Marshal(g.value(tool.Parameters, tool.Parameters, 0))
		if err != nil {
			return answer{}, fmt.Errorf("generating arguments of tool %s: %w", tool.Name, err)
		}
		a.addToolCall(toolCallID(digest, tool.Name, 0), tool.Name, string(args))
		a.finish = openai.FinishReasonToolCalls
	case req.ResponseFormat != nil && req.ResponseFormat.Type == openai.ChatCompletionResponseFormatTypeJSONSchema:
		var schema any
		if js := req.ResponseFormat.JSONSchema; js != nil && js.Schema != nil {
			raw, err := js.Schema.MarshalJSON()
			if err == nil {
				err = json.Unmarshal(raw, &schema)
			}
			if err != nil {
				return answer{}, &requestError{param: "response_format", message: "response_format.json_schema.schema is not valid JSON"}
			}
		}
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		a.pieces = splitRunes(mustJSON(g.value(schema, schema, 0)), 4)
		a.finish = openai.FinishReasonStop
	case req.ResponseFormat != nil && req.ResponseFormat.Type == openai.ChatCompletionResponseFormatTypeJSONObject:
		words := g.words(outputLength(m, rng), nil)
		a.pieces = splitRunes(mustJSON(map[string]any{"answer": strings.Join(words, "")}), 4)
		a.finish = openai.FinishReasonStop
	default:
		a.pieces = g.words(outputLength(m, rng), toolResultPrefix(req.Messages))
		a.finish = openai.FinishReasonStop
	}

	a.truncate(req)
	return a, nil
}

// toolCallID is "call_" and a hash of the request and the call: the same request always
// gets the same ids, and the calls of one answer get different ones.
func toolCallID(digest [32]byte, name string, index int) string {
	b := append(digest[:], name...)
	if index > 0 {
		// Index 0 hashes as before multi-call answers existed, so ids stay stable.
		b = append(b, byte(index), byte(index>>8))
	}
	id := sha256.Sum256(b)
	return "call_" + hex.EncodeToString(id[:12])
}

// addToolCall appends a call whose arguments are args, cut into pieces of 4 runes.
func (a *answer) addToolCall(id, name, args string) {
	k := len(a.toolCalls)
	a.toolCalls = append(a.toolCalls, openai.ToolCall{ID: id, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name}})
	for _, p := range splitRunes(args, 4) {
		a.pieces = append(a.pieces, p)
		a.callOf = append(a.callOf, k)
	}
}

// truncate cuts the answer at max_completion_tokens (or max_tokens) with finish_reason
// "length", as a real model cut off mid-answer, and fills in the tool calls' arguments
// from what is left; a call left with no argument fragment at all is dropped.
func (a *answer) truncate(req *openai.ChatCompletionRequest) {
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	if limit > 0 && len(a.pieces) > limit {
		a.pieces = a.pieces[:limit]
		if a.callOf != nil {
			a.callOf = a.callOf[:limit]
		}
		a.finish = openai.FinishReasonLength
	}
	if len(a.toolCalls) == 0 {
		return
	}
	args := make([]strings.Builder, len(a.toolCalls))
	for i, p := range a.pieces {
		args[a.callOf[i]].WriteString(p)
	}
	kept := a.toolCalls[:0]
	for k, tc := range a.toolCalls {
		if args[k].Len() == 0 && k > 0 {
			// Only calls after the cut are empty: callOf stays valid for the rest.
			continue
		}
		tc.Function.Arguments = args[k].String()
		kept = append(kept, tc)
	}
	a.toolCalls = kept
}

// semanticDigest hashes what decides the answer. JSON of the go-openai types is a stable
// encoding: struct fields in declaration order and map keys sorted.
func semanticDigest(req *openai.ChatCompletionRequest, seed int64) ([32]byte, error) {
	var rf any
	if req.ResponseFormat != nil {
		rf = req.ResponseFormat
	}
	b, err := json.Marshal(struct {
		Model          string                         `json:"model"`
		Messages       []openai.ChatCompletionMessage `json:"messages"`
		Tools          []openai.Tool                  `json:"tools"`
		ToolChoice     any                            `json:"tool_choice"`
		ResponseFormat any                            `json:"response_format"`
		Seed           int64                          `json:"seed"`
	}{req.Model, req.Messages, req.Tools, req.ToolChoice, rf, seed})
	if err != nil {
		return [32]byte{}, &requestError{message: "request cannot be re-encoded: " + err.Error()}
	}
	return sha256.Sum256(b), nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Generated values are maps, slices, strings, numbers and bools only.
		panic(fmt.Sprintf("sim: generated value does not encode: %v", err))
	}
	return string(b)
}

// functionTools returns the function definitions of the request's tools; built-in tool
// types (web_search, ...) are not simulated and are ignored.
func functionTools(tools []openai.Tool) []*openai.FunctionDefinition {
	var out []*openai.FunctionDefinition
	for _, t := range tools {
		if (t.Type == openai.ToolTypeFunction || t.Type == "") && t.Function != nil && t.Function.Name != "" {
			out = append(out, t.Function)
		}
	}
	return out
}

// decideToolCall applies OpenAI's tool_choice semantics the way an agent loop needs them:
// "required" or a named function always calls; "auto" (or absent) calls unless the last
// message is a tool result, so one call-then-answer round trip ends the loop; "none"
// never calls.
func decideToolCall(req *openai.ChatCompletionRequest, tools []*openai.FunctionDefinition) (bool, *openai.FunctionDefinition, error) {
	mode := "auto"
	var name string
	switch tc := req.ToolChoice.(type) {
	case nil:
	case string:
		mode = tc
	case map[string]any:
		fn, _ := tc["function"].(map[string]any)
		name, _ = fn["name"].(string)
		if name == "" {
			return false, nil, &requestError{param: "tool_choice", message: "tool_choice object must name a function: {\"type\":\"function\",\"function\":{\"name\":...}}"}
		}
		mode = "function"
	default:
		return false, nil, &requestError{param: "tool_choice", message: "tool_choice must be \"none\", \"auto\", \"required\" or a function object"}
	}
	switch mode {
	case "none":
		return false, nil, nil
	case "auto":
		if len(tools) == 0 {
			return false, nil, nil
		}
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Role
		}
		return last != openai.ChatMessageRoleTool, nil, nil
	case "required", "function":
		if len(tools) == 0 {
			return false, nil, &requestError{param: "tool_choice", message: "tool_choice is only allowed when tools are specified"}
		}
		if name == "" {
			return true, nil, nil
		}
		for _, t := range tools {
			if t.Name == name {
				return true, t, nil
			}
		}
		return false, nil, &requestError{param: "tool_choice", message: fmt.Sprintf("tool_choice names function %q, which is not in tools", name)}
	default:
		return false, nil, &requestError{param: "tool_choice", message: fmt.Sprintf("tool_choice %q: want \"none\", \"auto\" or \"required\"", mode)}
	}
}

// toolResultPrefix opens an answer that follows tool results with a sentence saying it
// used them, naming the tools, so an agent test can see the loop closed.
func toolResultPrefix(msgs []openai.ChatCompletionMessage) []string {
	var names []string
	seenTool := false
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == openai.ChatMessageRoleTool {
			seenTool = true
			continue
		}
		if m.Role == openai.ChatMessageRoleAssistant && len(m.ToolCalls) > 0 {
			for _, tc := range m.ToolCalls {
				if tc.Function.Name != "" && !contains(names, tc.Function.Name) {
					names = append(names, tc.Function.Name)
				}
			}
		}
		if m.Role == openai.ChatMessageRoleUser {
			break
		}
	}
	if !seenTool {
		return nil
	}
	s := "Based on the tool results, "
	if len(names) > 0 {
		s = "Based on the results of " + strings.Join(names, " and ") + ", "
	}
	return strings.SplitAfter(s, " ")[:len(strings.Fields(s))]
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// outputLength draws the answer length in tokens from the model's output distribution.
func outputLength(m *model, rng *rand.Rand) int {
	return max(1, int(math.Round(m.output.Sample(rng))))
}

// estimatePromptTokens is about chars/4 over every message's text, tool calls and the
// tool definitions, at least 1: close enough to a real tokenizer for rate limits and
// billing tests, and free of a tokenizer dependency.
func estimatePromptTokens(req *openai.ChatCompletionRequest) int {
	chars := 0
	for _, m := range req.Messages {
		chars += utf8.RuneCountInString(m.Content)
		for _, p := range m.MultiContent {
			chars += utf8.RuneCountInString(p.Text)
		}
		for _, tc := range m.ToolCalls {
			chars += utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments)
		}
	}
	for _, t := range req.Tools {
		if b, err := json.Marshal(t); err == nil {
			chars += utf8.RuneCount(b)
		}
	}
	return max(1, (chars+3)/4)
}

// lastUserWords are the first few words of the last user message, the seed of generated
// string arguments so that a tool call visibly relates to what was asked.
func lastUserWords(msgs []openai.ChatCompletionMessage) []string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		text := m.Content
		for _, p := range m.MultiContent {
			text += " " + p.Text
		}
		words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		for j := range words {
			words[j] = strings.ToLower(words[j])
		}
		return words[:min(len(words), 4)]
	}
	return nil
}

// splitRunes cuts s into pieces of n runes, never inside a UTF-8 sequence, so every
// streamed fragment is valid text on its own.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// Word classes of generated text: bland and domain-neutral, filled into sentence
// templates so that answers read like prose rather than a word salad.
var (
	nouns = strings.Fields(`system request model answer result value process service queue worker
		provider limit response message context task plan step report summary analysis option
		approach method signal metric record event window batch stream review policy route cost
		budget region account order document estimate change test schedule`)
	verbs = strings.Fields(`shows suggests indicates returns contains includes requires supports
		handles improves reduces increases keeps confirms explains describes affects follows`)
	adjectives = strings.Fields(`good stable large small recent current simple useful clear complete
		partial expected main different several typical important relevant`)
	adverbs      = strings.Fields(`quickly carefully clearly usually often typically roughly nearly also`)
	prepositions = strings.Fields(`in on for with from into over under across within through after before`)
	connectives  = strings.Fields(`However Therefore Meanwhile Overall Still Finally`)
	// templates use {n} noun, {v} verb, {a} adjective, {d} adverb, {p} preposition,
	// {c} connective.
	templates = []string{
		"The {a} {n} {v} the {n} {p} the {n}.",
		"{c}, the {n} {d} {v} a {a} {n}.",
		"This {n} {v} the {a} {n}.",
		"Each {n} {v} the {n} {p} a {a} {n}, which {v} the {n}.",
		"The {n} {d} {v} {a} {n}s {p} the {n}.",
		"A {a} {n} {v} the {n}.",
	}
	slotClasses = []struct {
		slot  string
		words []string
	}{{"{n}", nouns}, {"{v}", verbs}, {"{a}", adjectives}, {"{d}", adverbs}, {"{p}", prepositions}, {"{c}", connectives}}
	// vocabulary supplies generated strings when there is no user message to echo.
	vocabulary = slices.Concat(nouns, adjectives)
)

// generator turns a seeded PRNG into text and JSON values.
type generator struct {
	rng       *rand.Rand
	userWords []string
}

// words returns n word tokens, each but the first with its leading space, starting with
// prefix (counted within n). Sentences come from templates; the last token ends the text
// with a full stop even when n cuts a sentence short.
func (g *generator) words(n int, prefix []string) []string {
	n = max(n, len(prefix)+3)
	out := make([]string, 0, n)
	out = append(out, prefix...)
	pick := func(xs []string) string { return xs[g.rng.IntN(len(xs))] }
	for len(out) < n {
		for i, w := range strings.Fields(templates[g.rng.IntN(len(templates))]) {
			if len(out) == n {
				break
			}
			// A fixed slot order (never a map) keeps the PRNG draws, and so the text,
			// deterministic.
			for _, sc := range slotClasses {
				if strings.Contains(w, sc.slot) {
					w = strings.Replace(w, sc.slot, pick(sc.words), 1)
				}
			}
			// A sentence right after the tool-result prefix continues it in lower case.
			if i == 0 && len(out) > 0 && len(out) == len(prefix) {
				w = strings.ToLower(w[:1]) + w[1:]
			}
			if len(out) > 0 && !strings.HasSuffix(out[len(out)-1], " ") {
				w = " " + w
			}
			out = append(out, w)
		}
	}
	if last := out[n-1]; !strings.HasSuffix(last, ".") {
		out[n-1] = strings.TrimRight(last, ",") + "."
	}
	return out
}
