package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	openai "github.com/sashabaranov/go-openai"
	"gopkg.in/yaml.v3"
)

// Scripted answers: a Script fixes, per call type, the answers a test wants in order, so
// that an agent's plan, reflection verdicts, judge picks and failures can be driven
// deterministically. docs/sim-llm.md ("Scripted answers") is the user's guide.

// Where a request names its script and its call type. Headers serve clients that talk
// to sim-llm directly; the router forwards the body (metadata included) but no header;
// the markers in the messages need nothing of the caller but a system prompt or payload
// the test writes.
const (
	HeaderScript   = "X-Sim-Script"
	HeaderCall     = "X-Sim-Call"
	MetadataScript = "sim_script"
	MetadataCall   = "sim_call"
	// ModelScriptPrefix names a model's default script: "model:<model>" answers every
	// request for the model that names no script.
	ModelScriptPrefix = "model:"
)

var (
	scriptMarker = regexp.MustCompile(`\[sim-script:([A-Za-z0-9._:-]{1,128})\]`)
	callMarker   = regexp.MustCompile(`\[call:([A-Za-z0-9._-]{1,64})\]`)
	scriptName   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

// Script is an ordered list of rules. A request that selects the script is answered by
// the first rule that matches it, with that rule's next answer.
type Script struct {
	// Rules are tried in order. Required, at least one.
	Rules []Rule `yaml:"rules" json:"rules"`
	// Unmatched is what a request that no rule matches gets: "hash" (default), the
	// ordinary hash-based answer, or "error", a 400 with code sim_script_unmatched.
	Unmatched string `yaml:"unmatched,omitempty" json:"unmatched,omitempty"`
}

// Rule answers the requests it matches with Answers, in order.
type Rule struct {
	// Name labels the rule's counters. Default "rule-<n>", n counted from 1; unique.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Match selects the requests; every condition set must hold. An empty Match matches
	// every request.
	Match Match `yaml:"match,omitempty" json:"match,omitempty"`
	// Answers are consumed one per matched request. Required, at least one.
	Answers []Answer `yaml:"answers" json:"answers"`
	// Exhausted is what a matched request gets once every answer has been used:
	// "repeat" (default) the last answer again, "hash" the hash-based answer, "error" a
	// 400 with code sim_script_exhausted, "next" the next rule that matches.
	Exhausted string `yaml:"exhausted,omitempty" json:"exhausted,omitempty"`
}

// Match is a rule's conditions.
type Match struct {
	// Call is the request's call type: the X-Sim-Call header, else metadata.sim_call,
	// else the last "[call:<type>]" marker in a system, developer or user message.
	Call string `yaml:"call,omitempty" json:"call,omitempty"`
	// Regex (RE2 syntax) must match the text chosen by In.
	Regex string `yaml:"regex,omitempty" json:"regex,omitempty"`
	// In chooses the text Regex looks at: "last_user" (default) the last user message,
	// "system" the system and developer messages, "last" the last message whatever its
	// role (a tool result, say), "all" every message.
	In string `yaml:"in,omitempty" json:"in,omitempty"`
	// Schema is the name of the request's response_format json_schema.
	Schema string `yaml:"schema,omitempty" json:"schema,omitempty"`
	// LastRole is the role of the last message: "user", "tool", "assistant", ...
	LastRole string `yaml:"last_role,omitempty" json:"last_role,omitempty"`
	// Model is the requested model.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
}

// Answer is one scripted answer: exactly one of Content, JSON, ToolCalls, Error and
// Hash.
type Answer struct {
	// Content is the text of the answer.
	Content *string `yaml:"content,omitempty" json:"content,omitempty"`
	// JSON is encoded (compact, keys sorted) as the text of the answer.
	JSON any `yaml:"json,omitempty" json:"json,omitempty"`
	// ToolCalls are the answer's tool calls, in order (finish_reason "tool_calls").
	ToolCalls []ToolCallAnswer `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	// Error answers with an error status instead.
	Error *ErrorAnswer `yaml:"error,omitempty" json:"error,omitempty"`
	// Hash answers the ordinary hash-based answer (with Latency, when set).
	Hash bool `yaml:"hash,omitempty" json:"hash,omitempty"`
	// Latency, a Go duration ("2s"), replaces the model's latency for this answer; like
	// every latency it is multiplied by the time scale. Empty: the model's.
	Latency string `yaml:"latency,omitempty" json:"latency,omitempty"`
	// FinishReason replaces "stop" (text) or "tool_calls"; max_tokens may still cut the
	// answer to "length".
	FinishReason string `yaml:"finish_reason,omitempty" json:"finish_reason,omitempty"`
}

// ToolCallAnswer is one scripted tool call.
type ToolCallAnswer struct {
	// Name of the function. Required.
	Name string `yaml:"name" json:"name"`
	// Arguments: a string is sent as is; anything else is encoded as JSON. Default {}.
	Arguments any `yaml:"arguments,omitempty" json:"arguments,omitempty"`
	// ID of the call. Default: "call_" and a hash of the request and the call.
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
}

// ErrorAnswer is a scripted error, in OpenAI's error body.
type ErrorAnswer struct {
	// Status is 400..599. Required.
	Status int `yaml:"status" json:"status"`
	// Message of the body. Default "sim-llm scripted error <status>".
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	// Type of the body. Default "requests" for 429, "server_error" for 5xx,
	// "invalid_request_error" otherwise.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// Code of the body. Default "rate_limit_exceeded" for 429, else null.
	Code string `yaml:"code,omitempty" json:"code,omitempty"`
	// RetryAfter, a Go duration, sets Retry-After and retry-after-ms (not scaled).
	RetryAfter string `yaml:"retry_after,omitempty" json:"retry_after,omitempty"`
}

// ScriptState is a script's counters: GET /sim/scripts/{name}.
type ScriptState struct {
	Name  string      `json:"name"`
	Rules []RuleState `json:"rules"`
	// Unmatched counts the requests that selected the script and matched no rule.
	Unmatched int64 `json:"unmatched"`
}

// RuleState is one rule's counters.
type RuleState struct {
	Name string `json:"name"`
	Call string `json:"call,omitempty"`
	// Answers is the length of the rule's answer list; Remaining how many are unused.
	Answers   int `json:"answers"`
	Remaining int `json:"remaining"`
	// Calls counts the requests the rule took (an answer consumed, or the exhausted
	// behaviour applied), whatever became of them afterwards.
	Calls int64 `json:"calls"`
	// Served counts the 200 answers of the rule written whole: what a provider would bill.
	Served int64 `json:"served"`
}

// LoadScriptFile reads a Script from a YAML or JSON file; unknown fields are errors.
func LoadScriptFile(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("reading sim-llm script: %w", err)
	}
	var sc Script
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil && !errors.Is(err, io.EOF) {
		return Script{}, fmt.Errorf("parsing sim-llm script %s: %w", path, err)
	}
	if _, err := compileScript("file", sc); err != nil {
		return Script{}, fmt.Errorf("sim-llm script %s: %w", path, err)
	}
	return sc, nil
}

// script is a compiled Script and its position. mu guards next and the counters: the
// critical section is a few comparisons, and consuming answers in one order is the point.
type script struct {
	name      string
	rules     []*rule
	unmatched string

	mu           sync.Mutex
	unmatchedHit int64
}

type rule struct {
	name      string
	m         Match
	re        *regexp.Regexp
	answers   []scriptedAnswer
	exhausted string
	next      int
	calls     int64
	served    int64
}

// scriptedAnswer is a validated Answer.
type scriptedAnswer struct {
	kind       string // content, json, tool_calls, error, hash
	text       string // content, or the JSON text
	calls      []ToolCallAnswer
	argsJSON   []string
	err        *apiError
	retryAfter time.Duration
	latency    *time.Duration
	finish     openai.FinishReason
}

// compileScript validates sc; errors name the offending field.
func compileScript(name string, sc Script) (*script, error) {
	out := &script{name: name, unmatched: sc.Unmatched}
	switch sc.Unmatched {
	case "":
		out.unmatched = "hash"
	case "hash", "error":
	default:
		return nil, fmt.Errorf("unmatched %q: want hash or error", sc.Unmatched)
	}
	if len(sc.Rules) == 0 {
		return nil, errors.New("rules: at least one rule is required")
	}
	names := map[string]bool{}
	for i, r := range sc.Rules {
		field := fmt.Sprintf("rules[%d]", i)
		cr := &rule{name: r.Name, m: r.Match, exhausted: r.Exhausted}
		if cr.name == "" {
			cr.name = "rule-" + strconv.Itoa(i+1)
		}
		if names[cr.name] {
			return nil, fmt.Errorf("%s.name %q: duplicate rule name", field, cr.name)
		}
		names[cr.name] = true
		switch r.Exhausted {
		case "":
			cr.exhausted = "repeat"
		case "repeat", "hash", "error", "next":
		default:
			return nil, fmt.Errorf("%s.exhausted %q: want repeat, hash, error or next", field, r.Exhausted)
		}
		switch r.Match.In {
		case "", "last_user", "system", "last", "all":
		default:
			return nil, fmt.Errorf("%s.match.in %q: want last_user, system, last or all", field, r.Match.In)
		}
		if r.Match.Regex != "" {
			re, err := regexp.Compile(r.Match.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s.match.regex: %w", field, err)
			}
			cr.re = re
		} else if r.Match.In != "" {
			return nil, fmt.Errorf("%s.match.in: only with match.regex", field)
		}
		if len(r.Answers) == 0 {
			return nil, fmt.Errorf("%s.answers: at least one answer is required", field)
		}
		for j, a := range r.Answers {
			ca, err := compileAnswer(a)
			if err != nil {
				return nil, fmt.Errorf("%s.answers[%d]: %w", field, j, err)
			}
			cr.answers = append(cr.answers, ca)
		}
		out.rules = append(out.rules, cr)
	}
	return out, nil
}

func compileAnswer(a Answer) (scriptedAnswer, error) {
	var ca scriptedAnswer
	set := 0
	if a.Content != nil {
		set++
		ca.kind, ca.text, ca.finish = "content", *a.Content, openai.FinishReasonStop
	}
	if a.JSON != nil {
		set++
		b, err := json.Marshal(a.JSON)
		if err != nil {
			return ca, fmt.Errorf("json: %w (a JSON object's keys are strings: quote a YAML key such as 1)", err)
		}
		ca.kind, ca.text, ca.finish = "json", string(b), openai.FinishReasonStop
	}
	if len(a.ToolCalls) > 0 {
		set++
		ca.kind, ca.calls, ca.finish = "tool_calls", a.ToolCalls, openai.FinishReasonToolCalls
		for k, tc := range a.ToolCalls {
			if tc.Name == "" {
				return ca, fmt.Errorf("tool_calls[%d].name: required", k)
			}
			args := "{}"
			switch v := tc.Arguments.(type) {
			case nil:
			case string:
				args = v
			default:
				b, err := json.Marshal(v)
				if err != nil {
					return ca, fmt.Errorf("tool_calls[%d].arguments: %w (a JSON object's keys are strings: quote a YAML key such as 1)", k, err)
				}
				args = string(b)
			}
			if args == "" {
				args = "{}"
			}
			ca.argsJSON = append(ca.argsJSON, args)
		}
	}
	if e := a.Error; e != nil {
		set++
		if e.Status < 400 || e.Status > 599 {
			return ca, fmt.Errorf("error.status %d: want 400..599", e.Status)
		}
		ae := &apiError{status: e.Status, message: e.Message, typ: e.Type, code: e.Code}
		switch {
		case e.Status == http.StatusTooManyRequests:
			ae.typ = cmp.Or(ae.typ, limitRequests)
			ae.code = cmp.Or(ae.code, "rate_limit_exceeded")
		case e.Status >= 500:
			ae.typ = cmp.Or(ae.typ, "server_error")
		default:
			ae.typ = cmp.Or(ae.typ, "invalid_request_error")
		}
		ae.message = cmp.Or(ae.message, fmt.Sprintf("sim-llm scripted error %d", e.Status))
		if e.RetryAfter != "" {
			d, err := time.ParseDuration(e.RetryAfter)
			if err != nil || d < 0 {
				return ca, fmt.Errorf("error.retry_after %q: want a Go duration such as \"2s\"", e.RetryAfter)
			}
			ca.retryAfter = d
		}
		ca.kind, ca.err = "error", ae
	}
	if a.Hash {
		set++
		ca.kind = "hash"
	}
	if set != 1 {
		return ca, errors.New("want exactly one of content, json, tool_calls, error and hash")
	}
	if a.Latency != "" {
		d, err := time.ParseDuration(a.Latency)
		if err != nil || d < 0 {
			return ca, fmt.Errorf("latency %q: want a Go duration such as \"2s\"", a.Latency)
		}
		ca.latency = &d
	}
	if a.FinishReason != "" {
		if ca.kind == "error" || ca.kind == "hash" {
			return ca, fmt.Errorf("finish_reason: only with content, json or tool_calls")
		}
		ca.finish = openai.FinishReason(a.FinishReason)
	}
	return ca, nil
}

// scripts holds the installed scripts by name. count lets requests skip every lookup
// while no script is installed, the benchmark case.
type scripts struct {
	mu    sync.RWMutex
	byKey map[string]*script
	count atomic.Int64
}

func (x *scripts) set(sc *script) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byKey == nil {
		x.byKey = map[string]*script{}
	}
	x.byKey[sc.name] = sc
	x.count.Store(int64(len(x.byKey)))
}

func (x *scripts) get(name string) *script {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byKey[name]
}

func (x *scripts) remove(name string) *script {
	x.mu.Lock()
	defer x.mu.Unlock()
	sc := x.byKey[name]
	delete(x.byKey, name)
	x.count.Store(int64(len(x.byKey)))
	return sc
}

func (x *scripts) all() []*script {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*script, 0, len(x.byKey))
	for _, sc := range x.byKey {
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b *script) int { return strings.Compare(a.name, b.name) })
	return out
}

func (sc *script) state() ScriptState {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := ScriptState{Name: sc.name, Rules: make([]RuleState, 0, len(sc.rules)), Unmatched: sc.unmatchedHit}
	for _, r := range sc.rules {
		st.Rules = append(st.Rules, RuleState{Name: r.name, Call: r.m.Call, Answers: len(r.answers),
			Remaining: len(r.answers) - r.next, Calls: r.calls, Served: r.served})
	}
	return st
}

// scriptPick is what a script decided for one request: an answer (nil: the hash answer)
// or an error, and the rule to credit when the answer is served.
type scriptPick struct {
	sc     *script
	rule   *rule
	answer *scriptedAnswer
	err    *apiError
}

// served credits a 200 answer written whole to its rule.
func (p scriptPick) served() {
	if p.rule == nil {
		return
	}
	p.sc.mu.Lock()
	p.rule.served++
	p.sc.mu.Unlock()
}

// requestView is what the rules look at, taken from the request once.
type requestView struct {
	call, model, schema, lastRole string
	msgs                          []openai.ChatCompletionMessage
}

// pick consumes the answer of the first matching rule.
func (sc *script) pick(v requestView) scriptPick {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, r := range sc.rules {
		if !r.matches(v) {
			continue
		}
		if r.next < len(r.answers) {
			r.calls++
			a := &r.answers[r.next]
			r.next++
			return scriptPick{sc: sc, rule: r, answer: hashAsNil(a)}
		}
		switch r.exhausted {
		case "next":
			continue
		case "hash":
			r.calls++
			return scriptPick{sc: sc, rule: r}
		case "error":
			r.calls++
			return scriptPick{sc: sc, err: &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "sim_script_exhausted",
				message: fmt.Sprintf("sim-llm script %q: rule %q has served all of its %d answers (exhausted: error)", sc.name, r.name, len(r.answers))}}
		default: // repeat
			r.calls++
			return scriptPick{sc: sc, rule: r, answer: hashAsNil(&r.answers[len(r.answers)-1])}
		}
	}
	sc.unmatchedHit++
	if sc.unmatched == "error" {
		return scriptPick{sc: sc, err: &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "sim_script_unmatched",
			message: fmt.Sprintf("sim-llm script %q: no rule matches this request (call type %q; unmatched: error)", sc.name, v.call)}}
	}
	return scriptPick{sc: sc}
}

// hashAsNil returns a, or nil for a hash answer without latency: nil means "the hash
// answer as it is".
func hashAsNil(a *scriptedAnswer) *scriptedAnswer {
	if a.kind == "hash" && a.latency == nil {
		return nil
	}
	return a
}

func (r *rule) matches(v requestView) bool {
	m := r.m
	if (m.Call != "" && m.Call != v.call) || (m.Model != "" && m.Model != v.model) ||
		(m.Schema != "" && m.Schema != v.schema) || (m.LastRole != "" && m.LastRole != v.lastRole) {
		return false
	}
	return r.re == nil || r.re.MatchString(regexText(v.msgs, m.In))
}

// regexText is the text a rule's regex looks at.
func regexText(msgs []openai.ChatCompletionMessage, in string) string {
	switch in {
	case "system":
		var parts []string
		for _, m := range msgs {
			if m.Role == openai.ChatMessageRoleSystem || m.Role == openai.ChatMessageRoleDeveloper {
				parts = append(parts, messageText(m))
			}
		}
		return strings.Join(parts, "\n")
	case "last":
		return messageText(msgs[len(msgs)-1])
	case "all":
		parts := make([]string, 0, len(msgs))
		for _, m := range msgs {
			parts = append(parts, messageText(m))
		}
		return strings.Join(parts, "\n")
	default:
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == openai.ChatMessageRoleUser {
				return messageText(msgs[i])
			}
		}
		return ""
	}
}

func messageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, p := range m.MultiContent {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// instructs reports whether a message may carry a marker: what the caller wrote, never
// what a model or a tool answered.
func instructs(m openai.ChatCompletionMessage) bool {
	return m.Role == openai.ChatMessageRoleSystem || m.Role == openai.ChatMessageRoleDeveloper || m.Role == openai.ChatMessageRoleUser
}

// selectScript finds the script a request names (header, metadata, then the first
// "[sim-script:<name>]" marker), else its model's default script. explicit says whether
// the request named one.
func selectScript(h http.Header, req *openai.ChatCompletionRequest) (name string, explicit bool) {
	if v := h.Get(HeaderScript); v != "" {
		return v, true
	}
	if v := req.Metadata[MetadataScript]; v != "" {
		return v, true
	}
	for _, m := range req.Messages {
		if !instructs(m) {
			continue
		}
		text := messageText(m)
		if !strings.Contains(text, "[sim-script:") {
			continue // the common case, without the regexp
		}
		if sm := scriptMarker.FindStringSubmatch(text); sm != nil {
			return sm[1], true
		}
	}
	return ModelScriptPrefix + req.Model, false
}

// callType is the request's call type (header, metadata, then the last "[call:<type>]"
// marker of the last message that has one), or "".
func callType(h http.Header, req *openai.ChatCompletionRequest) string {
	if v := h.Get(HeaderCall); v != "" {
		return v
	}
	if v := req.Metadata[MetadataCall]; v != "" {
		return v
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if !instructs(req.Messages[i]) {
			continue
		}
		if all := callMarker.FindAllStringSubmatch(messageText(req.Messages[i]), -1); len(all) > 0 {
			return all[len(all)-1][1]
		}
	}
	return ""
}

// scripted decides a request's answer when a script applies to it. ok is false when
// none does: the hash answer, as without scripts.
func (s *Server) scripted(h http.Header, req *openai.ChatCompletionRequest) (scriptPick, bool) {
	name, explicit := selectScript(h, req)
	if !explicit && s.scripts.count.Load() == 0 {
		return scriptPick{}, false // no script anywhere: the benchmark case, no lock taken
	}
	sc := s.scripts.get(name)
	if sc == nil {
		if !explicit {
			return scriptPick{}, false
		}
		// Strict, so that a test that forgot to install its script (or removed it too
		// early) fails at once rather than asserting on hash answers.
		return scriptPick{err: &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "sim_script_not_found",
			message: fmt.Sprintf("sim-llm script %q is not installed (POST /sim/scripts)", name)}}, true
	}
	v := requestView{call: callType(h, req), model: req.Model, msgs: req.Messages}
	if v.msgs != nil {
		v.lastRole = req.Messages[len(req.Messages)-1].Role
	}
	if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil {
		v.schema = rf.JSONSchema.Name
	}
	return sc.pick(v), true
}

// build turns a scripted answer into the answer to req. hash is the request's hash
// answer, which supplies the digest and prompt tokens (and the answer itself for kind
// hash).
func (sa *scriptedAnswer) build(req *openai.ChatCompletionRequest, hash answer) answer {
	if sa.kind == "hash" {
		return hash
	}
	a := answer{promptTokens: hash.promptTokens, digest: hash.digest, finish: sa.finish}
	switch sa.kind {
	case "content":
		a.pieces = splitWords(sa.text)
	case "json":
		a.pieces = splitRunes(sa.text, 4)
	case "tool_calls":
		for k, tc := range sa.calls {
			id := tc.ID
			if id == "" {
				id = toolCallID(hash.digest, tc.Name, k)
			}
			a.addToolCall(id, tc.Name, sa.argsJSON[k])
		}
	}
	a.truncate(req)
	return a
}

// splitWords cuts text into word tokens, each with the whitespace before it (the first
// also keeps leading whitespace), as generated text is: one word is one token, and the
// pieces join back into the text exactly.
func splitWords(s string) []string {
	var out []string
	start, cut := 0, 0
	prevSpace, seenWord := true, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		switch {
		case space && !prevSpace:
			cut = i // a word ended: the next piece starts here if another word follows
		case !space && prevSpace && seenWord:
			out = append(out, s[start:cut])
			start = cut
		}
		seenWord = seenWord || !space
		prevSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// SetScript installs sc under name, replacing (and rewinding) a script of that name. A
// name "model:<model>" makes it the default script of that model.
func (s *Server) SetScript(name string, sc Script) error {
	if !scriptName.MatchString(name) {
		return fmt.Errorf("script name %q: want 1 to 128 of A-Z a-z 0-9 . _ : -", name)
	}
	if m, ok := strings.CutPrefix(name, ModelScriptPrefix); ok && s.models[m] == nil {
		return fmt.Errorf("script %q: model %q is not configured", name, m)
	}
	c, err := compileScript(name, sc)
	if err != nil {
		return err
	}
	s.scripts.set(c)
	return nil
}

// DeleteScript removes a script and returns its final counters.
func (s *Server) DeleteScript(name string) (ScriptState, bool) {
	sc := s.scripts.remove(name)
	if sc == nil {
		return ScriptState{}, false
	}
	return sc.state(), true
}

// ScriptState returns a script's counters.
func (s *Server) ScriptState(name string) (ScriptState, bool) {
	sc := s.scripts.get(name)
	if sc == nil {
		return ScriptState{}, false
	}
	return sc.state(), true
}

// scriptBody is POST /sim/scripts.
type scriptBody struct {
	Name string `json:"name"`
	Script
}

func scriptNotFound(name string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "script_not_found", param: "name",
		message: fmt.Sprintf("sim-llm script %q is not installed", name)}
}

func (s *Server) postScript(w http.ResponseWriter, r *http.Request) error {
	var b scriptBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return badRequest("", "the body must be {\"name\": \"...\", \"rules\": [...], \"unmatched\": \"hash|error\"}: "+err.Error())
	}
	if m, ok := strings.CutPrefix(b.Name, ModelScriptPrefix); ok && scriptName.MatchString(b.Name) && s.models[m] == nil {
		return modelNotFound(m)
	}
	if err := s.SetScript(b.Name, b.Script); err != nil {
		return badRequest("", err.Error())
	}
	s.log.Info("script installed", "script", b.Name, "rules", len(b.Rules))
	st, _ := s.ScriptState(b.Name)
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) getScript(w http.ResponseWriter, r *http.Request) error {
	st, ok := s.ScriptState(r.PathValue("name"))
	if !ok {
		return scriptNotFound(r.PathValue("name"))
	}
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) deleteScript(w http.ResponseWriter, r *http.Request) error {
	st, ok := s.DeleteScript(r.PathValue("name"))
	if !ok {
		return scriptNotFound(r.PathValue("name"))
	}
	s.log.Info("script removed", "script", st.Name)
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) listScripts(w http.ResponseWriter, _ *http.Request) error {
	all := s.scripts.all()
	out := struct {
		Scripts []ScriptState `json:"scripts"`
	}{Scripts: make([]ScriptState, 0, len(all))}
	for _, sc := range all {
		out.Scripts = append(out.Scripts, sc.state())
	}
	return writeJSON(w, http.StatusOK, out)
}
