package tier

import (
	"encoding/json"
	"errors"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/payload"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// legacyAccepts is what the tiers accepted before the shape moved to shared/payload: the
// payload decodes into OpenAI messages, every message's role is user, assistant or system,
// and there are messages, a prompt or an input. The shared check must accept exactly these.
func legacyAccepts(raw []byte) bool {
	var p struct {
		Messages []openai.ChatCompletionMessage `json:"messages"`
		Prompt   string                         `json:"prompt"`
		Input    string                         `json:"input"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	for _, m := range p.Messages {
		switch m.Role {
		case "user", "assistant", "system":
		default:
			return false
		}
	}
	return len(p.Messages) > 0 || p.Prompt != "" || p.Input != ""
}

var payloadCorpus = []string{
	`{"prompt":"hi"}`, `{"input":"hi"}`, `{"prompt":""}`, `{}`, `{"prompt":5}`, `{"input":null,"prompt":"x"}`,
	`{"prompt":"x","input":7}`, `{"PROMPT":"x"}`, `{"messages":"hello"}`, `{"messages":[]}`, `{"messages":null,"prompt":"x"}`,
	`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"role":"bot","content":"hi"}]}`,
	`{"messages":[{"content":"hi"}]}`, `{"messages":[{"role":"user"}]}`, `{"messages":[{"role":7}]}`,
	`{"messages":[null]}`, `{"messages":["hi"]}`, `{"messages":[{"role":"user","content":5}]}`,
	`{"messages":[{"role":"user","content":{"text":"x"}}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`,
	`{"messages":[{"role":"user","content":["hi"]}]}`, `{"messages":[{"role":"user","content":[{"type":1}]}]}`,
	`{"messages":[{"role":"user","content":[{"image_url":"https://x"}]}]}`,
	`{"messages":[{"role":"user","content":[{"image_url":{"url":3}}]}]}`,
	`{"messages":[{"role":"user","content":"x","name":"ann"}]}`, `{"messages":[{"role":"user","content":"x","name":1}]}`,
	`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"index":1.5}]}]}`, `{"messages":[{"role":"assistant","tool_calls":{}}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]}]}`,
	`{"messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`,
	`{"messages":[{"role":"assistant","function_call":"f"}]}`, `{"messages":[{"role":"user","tool_call_id":5}]}`,
	`{"messages":[{"role":"user","refusal":false}]}`, `{"messages":[{"role":"user","reasoning_content":[]}]}`,
	`{"messages":[{"Role":"user","Content":"hi"}]}`, `{"messages":[{"role":"user","content":"a","extra":{"x":1}}]}`,
	`{"messages":[{"role":"user","content":"a"},{"role":"tool","content":"b"}]}`, `{"other":{"deep":[1,2]},"prompt":"p"}`,
	`{"messages":[{"role":"system","content":[]}]}`, `{"messages":[{"role":"user","content":[null]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[null]}]}`, `{"messages":[{"role":null,"content":"x"}]}`,
	`{"messages":[{"role":"user","content":"x","multicontent":[{"type":"text"}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}],"multicontent":5}]}`,
	`{"messages":[{"role":"user","Content":[{"type":"text","text":"a"}]}]}`, `{"messages":[{"role":"user","CONTENT":"x"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text"}],"Content":"x"}]}`, `{"messages":[{"role":"user","multicontent":5}]}`,
	`{"messages":[{"role":"user","content":"x","MULTICONTENT":[{"type":1}]}]}`, `{"messages":[{"role":"user","content":[{"type":1}],"multicontent":3}]}`,
	`{"messages":[{"role":"us\u0065r","content":"x"}]}`, `{"prompt":"x","prompt":null}`, `{"messages":[{"role":"user"}],"messages":null}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"index":-0}]}]}`, `{"messages":[{"role":"assistant","tool_calls":[{"index":1e2}]}]}`,
}

func TestSharedPayloadCheckAcceptsWhatTheTiersAccepted(t *testing.T) {
	t.Parallel()
	for _, raw := range payloadCorpus {
		problems := payload.CheckChat(json.RawMessage(raw))
		require.Equal(t, legacyAccepts([]byte(raw)), len(problems) == 0, "%s: %v", raw, problems)
	}
}

func FuzzSharedPayloadCheck(f *testing.F) {
	for _, raw := range payloadCorpus {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) || !payload.IsObject(json.RawMessage(raw)) {
			return
		}
		problems := payload.CheckChat(json.RawMessage(raw))
		if legacyAccepts([]byte(raw)) != (len(problems) == 0) {
			t.Fatalf("%s: legacy %v, shared %v", raw, legacyAccepts([]byte(raw)), problems)
		}
	})
}

func TestInvalidPayloadNamesEveryFieldWithoutGoTypes(t *testing.T) {
	t.Parallel()
	_, err := Messages(skill.Skill{}, json.RawMessage(`{"messages":"hello"}`))
	var pe *PermanentError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, "INVALID_PAYLOAD", pe.Code)
	require.Equal(t, "payload.messages must be a list of messages ({role, content})", pe.Message)

	_, err = Messages(skill.Skill{}, json.RawMessage(`{"messages":[{"role":"bot","content":5}],"prompt":1}`))
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "payload.messages[0].content must be a string or a list of content parts ({type, text} or {type, image_url}); "+
		"payload.messages[0].role must be user, assistant or system; payload.prompt must be a string", pe.Message)
	require.NotContains(t, pe.Message, "openai")
	require.NotContains(t, pe.Message, "unmarshal")

	_, err = Messages(skill.Skill{}, json.RawMessage(`{}`))
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "payload needs messages (a list of {role, content}), a prompt string or an input string", pe.Message)

	msgs, err := Messages(skill.Skill{SystemPrompt: "be brief"}, json.RawMessage(`{"input":"hi"}`))
	require.NoError(t, err)
	require.Equal(t, []openai.ChatCompletionMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, msgs)
}
