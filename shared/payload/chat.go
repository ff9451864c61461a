package payload

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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
// {index, id, type, function: {name, arguments}}. These are exactly the payloads the
// executor's OpenAI message type decodes with encoding/json: member names match exactly,
// else ignoring case; null leaves a member unset; of two equal names the last counts.

// CheckChat returns every problem of raw as a chat payload (llm_only, tool_using). It reads
// the payload once, as a stream of tokens, and allocates only for what it reports.
func CheckChat(raw json.RawMessage) []Problem {
	w := walker{dec: decoders.Get().(*jsontext.Decoder)}
	w.dec.Reset(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	defer func() {
		w.dec.Reset(bytes.NewReader(nil)) // hold no payload while pooled
		decoders.Put(w.dec)
	}()
	if w.dec.PeekKind() != '{' {
		return []Problem{{Rule: "type", Message: "must be an object"}}
	}
	var messages int
	var prompt, input bool
	w.object("", "", func(name []byte) {
		switch member(name, "messages", "prompt", "input") {
		case "messages":
			n, ok := w.array("messages", "must be a list of messages ({role, content})", w.message)
			if ok {
				messages = n
			}
		case "prompt":
			if v, ok := w.str("prompt"); ok {
				prompt = string(v) != `""`
			}
		case "input":
			if v, ok := w.str("input"); ok {
				input = string(v) != `""`
			}
		default:
			w.skip()
		}
	})
	if w.broken {
		return []Problem{{Rule: "json", Message: "is not valid JSON"}}
	}
	if len(w.problems) == 0 && messages == 0 && !prompt && !input {
		w.add("", "required", "needs messages (a list of {role, content}), a prompt string or an input string")
	}
	return w.problems
}

func (w *walker) message(path string) {
	if w.dec.PeekKind() != '{' {
		// A null message decodes to one without a role, which no tier takes.
		w.add(path, "type", "must be a message object ({role, content})")
		w.skip()
		return
	}
	role, hasRole := "", false
	var c content
	w.object(path, "", func(name []byte) {
		switch m := member(name, "role", "content", "name", "refusal", "reasoning_content", "tool_call_id",
			"function_call", "tool_calls", "multicontent"); m {
		case "role":
			if w.dec.PeekKind() == 'n' {
				w.skip()
			} else if v, ok := w.str(path + ".role"); ok {
				role, hasRole = unquote(v), true
			}
		case "content":
			c.read(w, path, string(name) == `"content"`)
		case "multicontent":
			c.readMulti(w, path)
		case "function_call":
			w.function(path + ".function_call")
		case "tool_calls":
			w.array(path+".tool_calls", "must be a list of tool calls ({id, type, function})", w.toolCall)
		case "":
			w.skip()
		default:
			w.str(path + "." + m)
		}
	})
	c.check(w, path)
	switch {
	case !hasRole:
		if !w.reported(path + ".role") {
			w.add(path+".role", "required", "is required (user, assistant or system)")
		}
	case role != "user" && role != "assistant" && role != "system":
		w.add(path+".role", "oneof", "must be user, assistant or system")
	}
}

const contentMessage = "must be a string or a list of content parts ({type, text} or {type, image_url})"

// content follows the two ways go-openai reads a message: with content as a string (any
// case of the name; a "MultiContent" member then holds the parts), or, if that fails, with
// a member named exactly "content" as the list of parts (other cases of the name then hold
// a string). A message is taken if either way works.
type content struct {
	notString  bool // some content member is not a string or null
	notParts   bool // some "content" member is not a list of parts or null
	notOther   bool // some other case of the name is not a string or null
	badMulti   bool // some multicontent member is not a list of parts or null
	partsFound bool // the problems of some "content" list of parts are reported
}

func (c *content) read(w *walker, path string, exact bool) {
	switch k := w.dec.PeekKind(); {
	case k == 'n':
		w.skip()
	case k == '"':
		c.notParts = c.notParts || exact
		w.skip()
	case k == '[' && exact:
		c.notString = true
		n := len(w.problems)
		w.array(path+".content", contentMessage, w.part)
		if len(w.problems) > n {
			c.notParts, c.partsFound = true, true
		}
	default:
		c.notString = true
		if exact {
			c.notParts = true
		} else {
			c.notOther = true
		}
		w.skip()
	}
}

func (c *content) readMulti(w *walker, path string) {
	n := len(w.problems)
	if _, ok := w.array(path+".multicontent", contentMessage, w.part); !ok || len(w.problems) > n {
		c.badMulti = true
	}
	w.problems = w.problems[:n] // reported below, only if it decides
}

func (c *content) check(w *walker, path string) {
	asString := !c.notString && !c.badMulti
	asParts := !c.notParts && !c.notOther
	switch {
	case asString || asParts || c.partsFound:
	case !c.notString:
		w.add(path+".multicontent", "type", "must be a list of content parts ({type, text} or {type, image_url})")
	default:
		w.add(path+".content", "type", contentMessage)
	}
}

func (w *walker) part(path string) {
	w.object(path, "must be a content part object ({type, text} or {type, image_url})", func(name []byte) {
		switch m := member(name, "type", "text", "image_url"); m {
		case "image_url":
			w.object(path+".image_url", "must be an object ({url, detail})", func(name []byte) {
				if m := member(name, "url", "detail"); m != "" {
					w.str(path + ".image_url." + m)
				} else {
					w.skip()
				}
			})
		case "":
			w.skip()
		default:
			w.str(path + "." + m)
		}
	})
}

func (w *walker) toolCall(path string) {
	w.object(path, "must be a tool call object ({id, type, function})", func(name []byte) {
		switch m := member(name, "index", "id", "type", "function"); m {
		case "index":
			v := w.value()
			if v.Kind() != 'n' {
				if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
					w.add(path+".index", "type", "must be an integer")
				}
			}
		case "function":
			w.function(path + ".function")
		case "":
			w.skip()
		default:
			w.str(path + "." + m)
		}
	})
}

func (w *walker) function(path string) {
	w.object(path, "must be an object ({name, arguments})", func(name []byte) {
		if m := member(name, "name", "arguments"); m != "" {
			w.str(path + "." + m)
		} else {
			w.skip()
		}
	})
}

// decoders are reused: a jsontext.Decoder is a few hundred bytes, and every dispatch checks
// a payload.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// walker reads a payload's tokens and collects its problems.
type walker struct {
	dec      *jsontext.Decoder
	problems []Problem
	broken   bool // the text is not valid JSON
}

func (w *walker) add(path, rule, msg string) {
	w.problems = append(w.problems, Problem{Path: path, Rule: rule, Message: msg})
}

func (w *walker) reported(path string) bool {
	for _, p := range w.problems {
		if p.Path == path {
			return true
		}
	}
	return false
}

// object calls member with each member name of the object at the decoder, which must read
// exactly the member's value. null is no object and no problem; anything else is a problem
// with msg.
func (w *walker) object(path, msg string, member func(name []byte)) {
	switch w.dec.PeekKind() {
	case 'n':
		w.skip()
		return
	case '{':
	default:
		w.add(path, "type", msg)
		w.skip()
		return
	}
	w.token()
	for !w.broken && w.dec.PeekKind() == '"' {
		member(w.value())
	}
	w.token()
}

// array calls elem with the path of each element of the array at the decoder, which must
// read exactly the element, and returns how many it had. null is an empty array; anything
// else is a problem with msg, and ok is false.
func (w *walker) array(path, msg string, elem func(path string)) (n int, ok bool) {
	switch w.dec.PeekKind() {
	case 'n':
		w.skip()
		return 0, true
	case '[':
	default:
		w.add(path, "type", msg)
		w.skip()
		return 0, false
	}
	w.token()
	for !w.broken && w.dec.PeekKind() != ']' {
		elem(path + "[" + strconv.Itoa(n) + "]")
		n++
	}
	w.token()
	return n, !w.broken
}

// str reads a string member and returns it quoted: ok is false when it is null or not a
// string, which is a problem.
func (w *walker) str(path string) (jsontext.Value, bool) {
	v := w.value()
	switch v.Kind() {
	case '"':
		return v, true
	case 'n':
		return nil, false
	}
	if !w.broken {
		w.add(path, "type", "must be a string")
	}
	return nil, false
}

func (w *walker) value() jsontext.Value {
	v, err := w.dec.ReadValue()
	if err != nil {
		w.broken = true
	}
	return v
}

func (w *walker) skip() {
	if w.dec.SkipValue() != nil {
		w.broken = true
	}
}

func (w *walker) token() {
	if _, err := w.dec.ReadToken(); err != nil {
		w.broken = true
	}
}

// member returns which of the names the quoted member name is, as encoding/json matches a
// member to a field — exactly, else ignoring case — or "" for none.
func member(quoted []byte, names ...string) string {
	name := quoted
	if len(name) >= 2 && bytes.IndexByte(name, '\\') < 0 {
		name = name[1 : len(name)-1]
	} else {
		name = []byte(unquote(quoted))
	}
	for _, n := range names {
		if string(name) == n {
			return n
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(name), n) {
			return n
		}
	}
	return ""
}

// unquote decodes a JSON string as encoding/json does: invalid UTF-8 and unpaired
// surrogates become U+FFFD (AppendUnquote's error only says there were some).
func unquote(v []byte) string {
	b, _ := jsontext.AppendUnquote(nil, v)
	return string(b)
}
