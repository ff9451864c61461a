package payload

import (
	"encoding/json"
	"fmt"
)

// The shape of a chat payload, which llm_only and tool_using runs take:
//
//	{"messages": [{"role": "user", "content": "..."}, ...]}   messages in OpenAI form, or
//	{"prompt": "..."}  or  {"input": "..."}                      one user message
//
// Messages win over prompt, prompt over input; other members are the caller's own and are
// left alone. A message's role is user, assistant or system; its content a string or a
// list of content parts ({"type": "text", "text": ...} or {"type": "image_url",
// "image_url": {"url": ..., "detail": ...}}); name, refusal, reasoning_content and
// tool_call_id are strings; function_call is {name, arguments} and tool_calls a list of
// {id, type, function: {name, arguments}}. These are exactly the payloads the executor's
// OpenAI message type decodes, member names matched as encoding/json matches them (exactly,
// else ignoring case).

// chat holds the members of a chat payload the tiers read.
type chat struct {
	Messages json.RawMessage `json:"messages"`
	Prompt   json.RawMessage `json:"prompt"`
	Input    json.RawMessage `json:"input"`
}

type message struct {
	Role             json.RawMessage `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             json.RawMessage `json:"name"`
	Refusal          json.RawMessage `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	ToolCallID       json.RawMessage `json:"tool_call_id"`
	FunctionCall     json.RawMessage `json:"function_call"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
}

type contentPart struct {
	Type     json.RawMessage `json:"type"`
	Text     json.RawMessage `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

type imageURL struct {
	URL    json.RawMessage `json:"url"`
	Detail json.RawMessage `json:"detail"`
}

type functionCall struct {
	Name      json.RawMessage `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type toolCall struct {
	Index    json.RawMessage `json:"index"`
	ID       json.RawMessage `json:"id"`
	Type     json.RawMessage `json:"type"`
	Function json.RawMessage `json:"function"`
}

// CheckChat returns every problem of raw as a chat payload (llm_only, tool_using).
func CheckChat(raw json.RawMessage) []Problem {
	var c checker
	var p chat
	if !c.object("", raw, &p, "must be an object") {
		return c.problems
	}
	c.str("prompt", p.Prompt)
	c.str("input", p.Input)
	msgs, _ := c.array("messages", p.Messages, "must be a list of messages ({role, content})")
	for i, m := range msgs {
		c.message(fmt.Sprintf("messages[%d]", i), m)
	}
	if len(c.problems) == 0 && len(msgs) == 0 && !nonEmptyString(p.Prompt) && !nonEmptyString(p.Input) {
		c.add("", "required", "needs messages (a list of {role, content}), a prompt string or an input string")
	}
	return c.problems
}

type checker struct{ problems []Problem }

func (c *checker) add(path, rule, msg string) {
	c.problems = append(c.problems, Problem{Path: path, Rule: rule, Message: msg})
}

func (c *checker) message(path string, raw json.RawMessage) {
	var m message
	if !c.object(path, raw, &m, "must be a message object ({role, content})") {
		return
	}
	var role string
	switch {
	case absent(m.Role):
		c.add(path+".role", "required", "is required (user, assistant or system)")
	case json.Unmarshal(m.Role, &role) != nil:
		c.add(path+".role", "type", "must be a string: user, assistant or system")
	case role != "user" && role != "assistant" && role != "system":
		c.add(path+".role", "oneof", "must be user, assistant or system")
	}
	if !absent(m.Content) && kind(m.Content) != '"' {
		parts, ok := c.array(path+".content", m.Content,
			"must be a string or a list of content parts ({type, text} or {type, image_url})")
		if ok {
			for i, part := range parts {
				c.part(fmt.Sprintf("%s.content[%d]", path, i), part)
			}
		}
	}
	c.str(path+".name", m.Name)
	c.str(path+".refusal", m.Refusal)
	c.str(path+".reasoning_content", m.ReasoningContent)
	c.str(path+".tool_call_id", m.ToolCallID)
	c.function(path+".function_call", m.FunctionCall)
	calls, _ := c.array(path+".tool_calls", m.ToolCalls, "must be a list of tool calls ({id, type, function})")
	for i, raw := range calls {
		tp := fmt.Sprintf("%s.tool_calls[%d]", path, i)
		var tc toolCall
		if !c.object(tp, raw, &tc, "must be a tool call object ({id, type, function})") {
			continue
		}
		var n *int
		if !absent(tc.Index) && json.Unmarshal(tc.Index, &n) != nil {
			c.add(tp+".index", "type", "must be an integer")
		}
		c.str(tp+".id", tc.ID)
		c.str(tp+".type", tc.Type)
		c.function(tp+".function", tc.Function)
	}
}

func (c *checker) part(path string, raw json.RawMessage) {
	var p contentPart
	if !c.object(path, raw, &p, "must be a content part object ({type, text} or {type, image_url})") {
		return
	}
	c.str(path+".type", p.Type)
	c.str(path+".text", p.Text)
	var u imageURL
	if !absent(p.ImageURL) && c.object(path+".image_url", p.ImageURL, &u, "must be an object ({url, detail})") {
		c.str(path+".image_url.url", u.URL)
		c.str(path+".image_url.detail", u.Detail)
	}
}

func (c *checker) function(path string, raw json.RawMessage) {
	var f functionCall
	if !absent(raw) && c.object(path, raw, &f, "must be an object ({name, arguments})") {
		c.str(path+".name", f.Name)
		c.str(path+".arguments", f.Arguments)
	}
}

// object decodes the object raw into dst, or records that it is not one.
func (c *checker) object(path string, raw json.RawMessage, dst any, msg string) bool {
	if kind(raw) != '{' || json.Unmarshal(raw, dst) != nil {
		c.add(path, "type", msg)
		return false
	}
	return true
}

// array returns the elements of raw: none when it is absent or null, and ok false (with a
// problem recorded) when it is not an array.
func (c *checker) array(path string, raw json.RawMessage, msg string) ([]json.RawMessage, bool) {
	if absent(raw) {
		return nil, true
	}
	var elems []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &elems) != nil {
		c.add(path, "type", msg)
		return nil, false
	}
	return elems, true
}

// str records a problem unless raw is absent, null or a string.
func (c *checker) str(path string, raw json.RawMessage) {
	if !absent(raw) && kind(raw) != '"' {
		c.add(path, "type", "must be a string")
	}
}

// kind is the first byte of a JSON value: '{', '[', '"', 'n', 't', 'f' or a digit or '-'.
func kind(raw json.RawMessage) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b
	}
	return 0
}

// absent reports a member that is missing or null: encoding/json leaves the field as it is.
func absent(raw json.RawMessage) bool { return len(raw) == 0 || kind(raw) == 'n' }

func nonEmptyString(raw json.RawMessage) bool { return kind(raw) == '"' && string(raw) != `""` }
