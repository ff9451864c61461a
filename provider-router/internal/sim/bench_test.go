package sim_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

// benchRequest is an agent-sized request: a 2 KB system prompt and a short user message.
func benchRequest(system string) []byte {
	b, _ := json.Marshal(openai.ChatCompletionRequest{Model: "sim-fast", Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: system},
		{Role: openai.ChatMessageRoleUser, Content: "Summarise the quarterly report in three sentences."},
	}})
	return b
}

func benchServe(b *testing.B, s *sim.Server, body []byte) {
	b.ReportAllocs()
	h := s.Handler()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkChatHash is the hash-based answer, the benchmark and development path.
func BenchmarkChatHash(b *testing.B) {
	s, err := sim.New(sim.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, s, benchRequest(strings.Repeat("You are a careful planner. ", 80)))
}

// BenchmarkChatScripted is a scripted answer chosen by a marker and a call type.
func BenchmarkChatScripted(b *testing.B) {
	s, err := sim.New(sim.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	text := "The plan has three steps."
	if err := s.SetScript("bench", sim.Script{Rules: []sim.Rule{{Match: sim.Match{Call: "plan"}, Answers: []sim.Answer{{Content: &text}}}}}); err != nil {
		b.Fatal(err)
	}
	benchServe(b, s, benchRequest(strings.Repeat("You are a careful planner. ", 80)+"[sim-script:bench] [call:plan]"))
}
