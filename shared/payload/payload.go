// Package payload is the contract of a job's payload for each execution type: the shape the
// dispatcher checks before it answers 202 and the executor checks again when it picks the
// run up, so both refuse the same payloads in the same words, each naming the field.
package payload

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// Problem is one thing wrong with a payload. Path is the field's JSON path inside the
// payload ("messages[0].role"; "" for the payload itself), Rule the rule it breaks and
// Message what is wrong, in the caller's terms.
type Problem struct {
	Path    string
	Rule    string
	Message string
}

// Field is the problem's path from the request body: "payload.messages[0].role".
func (p Problem) Field() string {
	if p.Path == "" {
		return "payload"
	}
	return "payload." + p.Path
}

// Check returns every problem of raw as the payload of a run of the execution type. A
// payload is a JSON object; llm_only, tool_using and autonomous runs need a chat payload
// (CheckChat): an autonomous run's goal is its prompt or messages.
// Execution types without a payload contract of their own accept any object.
func Check(executionType string, raw json.RawMessage) []Problem {
	if !IsObject(raw) {
		return []Problem{{Rule: "type", Message: "must be an object"}}
	}
	switch run.ExecutionType(executionType) {
	case run.LLMOnly, run.ToolUsing, run.Autonomous:
		return CheckChat(raw)
	}
	return nil
}

// Describe is the problems as one sentence, for a run's error message:
// "payload.messages[0].role must be user, assistant or system; payload.prompt must be a string".
func Describe(ps []Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Field() + " " + p.Message
	}
	return strings.Join(parts, "; ")
}

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
