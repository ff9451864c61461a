package estimate

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func setup(t *testing.T, opts Options) (*Estimator, *redis.Client) {
	t.Helper()
	_, client := testkit.Redis(t)
	e, err := New(client, opts)
	require.NoError(t, err)
	return e, client
}

func TestPriorWhenNothingKnown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := setup(t, Options{})
	for _, tc := range []struct{ max, want int }{{0, 512}, {100, 100}, {4096, 512}} {
		n, err := e.Output(ctx, "summarize", "gpt-4o", tc.max)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "max_tokens %d", tc.max)
	}
}

func TestConstantSequenceConvergesFromAbove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := setup(t, Options{})
	prev := 1 << 30
	for range 30 {
		require.NoError(t, e.Record(ctx, "classify", "gpt-4o-mini", 200))
		n, err := e.Output(ctx, "classify", "gpt-4o-mini", 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 200, "never below what every call used")
		require.LessOrEqual(t, n, prev, "tightens as the spread shrinks")
		prev = n
	}
	require.LessOrEqual(t, prev, 201)
	n, err := e.Output(ctx, "classify", "gpt-4o-mini", 150)
	require.NoError(t, err)
	require.Equal(t, 150, n, "capped by max_tokens")
}

// TestNoisySequenceBiasedHigh: completions spread evenly over 100..300. The estimate made
// before each call must cover most calls (it is biased high), without drifting to the cap.
func TestNoisySequenceBiasedHigh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := setup(t, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	covered, total := 0, 0
	var ests []int
	for i := range 300 {
		est, err := e.Output(ctx, "draft", "claude", 4096)
		require.NoError(t, err)
		x := 100 + rng.IntN(201)
		if i >= 50 {
			total++
			if x <= est {
				covered++
			}
			ests = append(ests, est)
		}
		require.NoError(t, e.Record(ctx, "draft", "claude", x))
	}
	sort.Ints(ests)
	median := ests[len(ests)/2]
	t.Logf("covered %d/%d, median estimate %d", covered, total, median)
	require.GreaterOrEqual(t, float64(covered)/float64(total), 0.85)
	require.Greater(t, median, 200, "above the mean")
	require.Less(t, median, 400, "but not absurdly so")
}

func TestAdaptsToLevelShift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := setup(t, Options{})
	for range 30 {
		require.NoError(t, e.Record(ctx, "analyst", "gpt-4.1", 100))
	}
	for range 6 {
		require.NoError(t, e.Record(ctx, "analyst", "gpt-4.1", 1500))
	}
	n, err := e.Output(ctx, "analyst", "gpt-4.1", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1500, "six observations of a new regime are enough (alpha 0.3)")
}

func TestSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, client := setup(t, Options{})
	b, err := New(client, Options{CacheTTL: time.Nanosecond})
	require.NoError(t, err)
	require.NoError(t, a.Record(ctx, "s", "m", 300))
	sa, err := a.Stats(ctx, "s", "m")
	require.NoError(t, err)
	sb, err := b.Stats(ctx, "s", "m")
	require.NoError(t, err)
	require.Equal(t, sa, sb)
	require.Equal(t, Stats{Mean: 300, Dev: 150, Samples: 1}, sb)
	ttl, err := client.PTTL(ctx, statsKey("s", "m")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 6*24*time.Hour)
}

// TestDeferMatchesRecord: deferred observations, flushed in one pipeline, fold into the
// same statistics as recording each at once, in order; before the flush nothing is written.
func TestDeferMatchesRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, client := setup(t, Options{})
	e.Start(ctx, time.Hour, slog.New(slog.DiscardHandler))
	obs := []int{120, 480, 90, 300}
	for _, x := range obs {
		require.NoError(t, e.Record(ctx, "direct", "m", x))
		require.NoError(t, e.Defer(ctx, "deferred", "m", x))
		require.NoError(t, e.Defer(ctx, "other", "m", x*2))
	}
	n, err := client.Exists(ctx, statsKey("deferred", "m")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written before the flush")
	require.NoError(t, e.Flush(ctx))
	want, err := client.HGetAll(ctx, statsKey("direct", "m")).Result()
	require.NoError(t, err)
	got, err := client.HGetAll(ctx, statsKey("deferred", "m")).Result()
	require.NoError(t, err)
	require.Equal(t, want, got)
	s, err := e.Stats(ctx, "other", "m")
	require.NoError(t, err)
	require.Equal(t, 4, s.Samples)
	require.Error(t, e.Defer(ctx, "deferred", "m", -1))

	// Stop writes what is left, and Defer records directly afterwards.
	require.NoError(t, e.Defer(ctx, "deferred", "m", 100))
	require.NoError(t, e.Stop(ctx))
	require.NoError(t, e.Defer(ctx, "deferred", "m", 100))
	s, err = e.Stats(ctx, "deferred", "m")
	require.NoError(t, err)
	require.Equal(t, 6, s.Samples)
}

func TestPromptTokens(t *testing.T) {
	t.Parallel()
	one := openai.ChatCompletionRequest{Model: "gpt-4o", Messages: []openai.ChatCompletionMessage{
		{Role: "user", Content: "hello world"},
	}}
	// 3 (reply priming) + 3 (message framing) + 1 ("user") + 2 ("hello", " world").
	require.Equal(t, 9, PromptTokens(one))
	one.Model = "gpt-4-0613" // cl100k_base tokenizes this text the same way
	require.Equal(t, 9, PromptTokens(one))

	long := openai.ChatCompletionRequest{Model: "claude-sonnet-4", Messages: []openai.ChatCompletionMessage{
		{Role: "system", Content: "You are a careful analyst. Answer in three bullet points."},
		{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "What is in this picture?"},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "https://x/y.png", Detail: openai.ImageURLDetailLow}},
		}},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function",
			Function: openai.FunctionCall{Name: "lookup", Arguments: `{"q":"cats"}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: `{"result":"a cat"}`},
	}, Tools: []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "lookup",
		Description: "Look something up", Parameters: map[string]any{"type": "object"}}}}}
	n := PromptTokens(long)
	chars := 0
	for _, m := range long.Messages {
		chars += len(m.Content)
	}
	require.Greater(t, n, 85+chars/4, "image at its billed size plus the text")
	require.Less(t, n, 85+chars+200)
	require.Equal(t, 9+100, RequestTokens(openai.ChatCompletionRequest{Model: "gpt-4o", Messages: one.Messages}, 100))
	require.Equal(t, 300, MaxTokens(openai.ChatCompletionRequest{MaxTokens: 300}))
}

func BenchmarkPromptTokens(b *testing.B) {
	req := openai.ChatCompletionRequest{Model: "gpt-4o", Messages: []openai.ChatCompletionMessage{
		{Role: "system", Content: "You are a careful analyst. Answer in three bullet points."},
		{Role: "user", Content: "Summarize the quarterly report: revenue grew 12% while costs fell 3%, driven by..."},
	}}
	PromptTokens(req)
	b.ReportAllocs()
	for b.Loop() {
		PromptTokens(req)
	}
}

// reactRun is the prompts of one agent run: a skill's system prompt (the same in every run),
// the user's question, then per iteration the assistant's tool call and the tool's result,
// the whole conversation sent on every call. run makes the question and results unique.
func reactRun(run, iterations int) []openai.ChatCompletionRequest {
	system := strings.Repeat("You are a careful analyst who uses tools to look things up before answering. ", 30)
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: system},
		{Role: "user", Content: fmt.Sprintf("Run %d: compare the quarterly figures of the three regions.", run)}}
	var calls []openai.ChatCompletionRequest
	for i := range iterations {
		calls = append(calls, openai.ChatCompletionRequest{Model: "gpt-4o", Messages: slices.Clone(msgs)})
		msgs = append(msgs,
			openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: fmt.Sprint("c", i), Type: "function",
				Function: openai.FunctionCall{Name: "lookup", Arguments: fmt.Sprintf(`{"region":%d,"run":%d}`, i, run)}}}},
			openai.ChatCompletionMessage{Role: "tool", ToolCallID: fmt.Sprint("c", i),
				Content: strings.Repeat(fmt.Sprintf("region %d of run %d: revenue 12.%d M, costs 9.%d M; ", i, run, i, run%10), 80)})
	}
	return calls
}

// TestPromptTokensCachedCountIsTheCount: a text counted again is served from the cache,
// with the count the tokenizer gave; a different text of the same length is not.
func TestPromptTokensCachedCountIsTheCount(t *testing.T) {
	t.Parallel()
	a := strings.Repeat("the cat sat on the mat ", 20)
	b := strings.Repeat("xq zv wk jf pl mn rtbs ", 20) // same length, other tokens
	require.Equal(t, len(a), len(b))
	c := o200k()
	want, err := c.Count(a)
	require.NoError(t, err)
	require.Equal(t, want, countText(c, a))
	require.True(t, counts.Contains(countKey{codec: c.GetName(), sum: maphash.String(countSeed, a), n: len(a)}))
	require.Equal(t, want, countText(c, a), "served from the cache")
	other, err := c.Count(b)
	require.NoError(t, err)
	require.NotEqual(t, want, other)
	require.Equal(t, other, countText(c, b))
	// A whole agent run counts what counting each call from scratch would.
	for _, req := range reactRun(1, 5) {
		n := tokensReply
		for _, m := range req.Messages {
			n += tokensPerMessage
			for _, s := range []string{m.Role, m.Content} {
				k, err := c.Count(s)
				require.NoError(t, err)
				n += k
			}
			for _, tc := range m.ToolCalls {
				k1, _ := c.Count(tc.Function.Name)
				k2, _ := c.Count(tc.Function.Arguments)
				n += tokensPerMessage + k1 + k2
			}
			if m.ToolCallID != "" {
				k, _ := c.Count(m.ToolCallID)
				n += k
			}
		}
		require.Equal(t, n, PromptTokens(req))
	}
}

// BenchmarkPromptTokensReActRun counts the prompts of one five-iteration agent run (a new
// run, so only the system prompt was seen before).
func BenchmarkPromptTokensReActRun(b *testing.B) {
	run := 0
	b.ReportAllocs()
	for b.Loop() {
		run++
		for _, req := range reactRun(run, 5) {
			PromptTokens(req)
		}
	}
}
