package estimate

import (
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	openai "github.com/sashabaranov/go-openai"
	"github.com/tiktoken-go/tokenizer"
)

// The framing OpenAI's chat format adds, per its cookbook ("How to count tokens with
// tiktoken"): every message costs 3 tokens beyond its fields, a name 1 more, and every
// reply is primed with 3.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensReply      = 3
)

// Image parts are not text: OpenAI bills a low-detail image 85 tokens and a high-detail one
// 85 + 170 per 512-px tile; without the image's size we assume a 1024×1024 picture (4
// tiles), the common case, and let reconciliation correct the rest.
const (
	imageLowTokens  = 85
	imageHighTokens = 85 + 4*170
)

var (
	o200k  = sync.OnceValue(func() tokenizer.Codec { return mustCodec(tokenizer.O200kBase) })
	cl100k = sync.OnceValue(func() tokenizer.Codec { return mustCodec(tokenizer.Cl100kBase) })
)

func mustCodec(enc tokenizer.Encoding) tokenizer.Codec {
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil // unreachable for the encodings above; countText then falls back
	}
	return c
}

// codecFor picks OpenAI's encoding for model. Other providers' tokenizers are not public
// in a form we can embed; o200k_base is within some 10-20% of them on English text, and
// the reservation is reconciled with the provider's own count afterwards anyway.
func codecFor(model string) tokenizer.Codec {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 { // OpenRouter-style "openai/gpt-4"
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "gpt-4o") || strings.HasPrefix(m, "chatgpt-4o") {
		return o200k()
	}
	if strings.HasPrefix(m, "gpt-4") && !strings.HasPrefix(m, "gpt-4.") || strings.HasPrefix(m, "gpt-3.5") ||
		strings.HasPrefix(m, "gpt-35") {
		return cl100k()
	}
	return o200k()
}

// countText counts s with c, falling back to the four-characters-a-token rule of thumb if
// the tokenizer fails (it does not on valid input). Counts of texts of cacheFrom bytes or
// more are remembered (counts): an agent sends its whole conversation on every call, and a
// skill's system prompt on every run, so most of a prompt was counted before.
func countText(c tokenizer.Codec, s string) int {
	if s == "" {
		return 0
	}
	if c == nil {
		return (len(s) + 3) / 4
	}
	var key countKey
	if len(s) >= cacheFrom {
		key = countKey{codec: c.GetName(), sum: maphash.String(countSeed, s), n: len(s)}
		if n, ok := counts.Get(key); ok {
			return n
		}
	}
	n, err := c.Count(s)
	if err != nil {
		return (len(s) + 3) / 4
	}
	if len(s) >= cacheFrom {
		counts.Add(key, n)
	}
	return n
}

// cacheFrom is the shortest text whose count is cached: below it the tokenizer is about as
// fast as the look-up.
const cacheFrom = 64

// countKey names a text by its encoding, a 64-bit hash and its length (the cache holds no
// prompt text). Two texts of one length colliding in the hash — about 1 in 10¹² among the
// cached ones — would share a count: only an estimate, reconciled with the provider's.
type countKey struct {
	codec string
	sum   uint64
	n     int
}

var (
	countSeed = maphash.MakeSeed()
	// counts holds the token counts of the 16,384 texts last counted (under 1 MiB).
	counts = must(lru.New[countKey, int](16384))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// PromptTokens counts the prompt tokens of an OpenAI-form request with the model's BPE
// (github.com/tiktoken-go/tokenizer, which embeds the vocabularies, so nothing is
// downloaded at run time): messages with OpenAI's chat framing, tool calls, image parts at
// their billed size, and tool definitions as their JSON (OpenAI renders them differently,
// so that part is approximate).
func PromptTokens(req openai.ChatCompletionRequest) int {
	c := codecFor(req.Model)
	n := tokensReply
	for _, m := range req.Messages {
		n += tokensPerMessage + countText(c, m.Role) + countText(c, m.Content) + countText(c, m.ReasoningContent)
		if m.Name != "" {
			n += tokensPerName + countText(c, m.Name)
		}
		for _, p := range m.MultiContent {
			switch p.Type {
			case openai.ChatMessagePartTypeImageURL:
				if p.ImageURL != nil && p.ImageURL.Detail == openai.ImageURLDetailLow {
					n += imageLowTokens
				} else {
					n += imageHighTokens
				}
			default:
				n += countText(c, p.Text)
			}
		}
		for _, tc := range m.ToolCalls {
			n += tokensPerMessage + countText(c, tc.Function.Name) + countText(c, tc.Function.Arguments)
		}
		if m.ToolCallID != "" {
			n += countText(c, m.ToolCallID)
		}
	}
	if len(req.Tools) > 0 {
		if b, err := json.Marshal(req.Tools); err == nil {
			n += countText(c, string(b))
		}
	}
	return n
}

// RequestTokens is what a call reserves from the TPM bucket: its prompt tokens plus the
// expected completion, the latter from an Estimator (capped by the request's max tokens).
func RequestTokens(req openai.ChatCompletionRequest, expectedOutput int) int {
	return PromptTokens(req) + expectedOutput
}

// MaxTokens is the request's completion cap, whichever of the two fields set it (0: none).
func MaxTokens(req openai.ChatCompletionRequest) int {
	return max(req.MaxCompletionTokens, req.MaxTokens)
}
