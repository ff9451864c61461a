package payload

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckNamesEveryWrongField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		execType, raw string
		want          map[string]string // field -> rule
	}{
		{"llm_only", `{"prompt":"hi"}`, nil},
		{"tool_using", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, nil},
		{"llm_only", `{}`, map[string]string{"payload": "required"}},
		{"llm_only", `[]`, map[string]string{"payload": "type"}},
		{"chain", `{}`, nil},
		{"autonomous", `{"prompt":"Plan a trip"}`, nil},
		{"autonomous", `{"goal":"Plan a trip"}`, map[string]string{"payload": "required"}},
		{"autonomous", `{"messages":[{"role":"robot","content":"x"}]}`, map[string]string{"payload.messages[0].role": "oneof"}},
		{"chain", `"x"`, map[string]string{"payload": "type"}},
		{"llm_only", `{"messages":"hello"}`, map[string]string{"payload.messages": "type"}},
		{"llm_only", `{"messages":[{"role":"bot","content":5},{"content":"x"},3],"input":[]}`, map[string]string{
			"payload.input": "type", "payload.messages[0].role": "oneof", "payload.messages[0].content": "type",
			"payload.messages[1].role": "required", "payload.messages[2]": "type"}},
		{"llm_only", `{"messages":[{"role":"assistant","tool_calls":[{"index":"1","function":{"name":2}}],
			"content":[{"image_url":{"url":1}}]}]}`, map[string]string{
			"payload.messages[0].tool_calls[0].index": "type", "payload.messages[0].tool_calls[0].function.name": "type",
			"payload.messages[0].content[0].image_url.url": "type"}},
	}
	for _, tc := range cases {
		got := map[string]string{}
		for _, p := range Check(tc.execType, json.RawMessage(tc.raw)) {
			got[p.Field()] = p.Rule
			require.NotEmpty(t, p.Message)
		}
		if tc.want == nil {
			tc.want = map[string]string{}
		}
		require.Equal(t, tc.want, got, tc.raw)
	}
}
