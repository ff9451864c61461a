package sim

import (
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// firstUserMax bounds the excerpt of a repeated request's first user message.
const firstUserMax = 120

// Repeat is one request that was served more than once.
type Repeat struct {
	// Digest is the hex SHA-256 of what decides the answer: model, messages, tools,
	// tool_choice, response_format and seed.
	Digest string `json:"digest"`
	// Served is how many times it was answered 200 with the whole answer written.
	Served int64 `json:"served"`
	// FirstUser is the request's first user message, cut at 120 bytes, so that a
	// client that makes its prompts unique can tell which of its jobs asked twice.
	FirstUser string `json:"first_user"`
}

// RepeatTotals sums the repeats, as GET /sim/stats shows them.
type RepeatTotals struct {
	// Distinct is the number of different requests served.
	Distinct int64 `json:"distinct"`
	// Extra is the answers served beyond the first of each request: what a client paid
	// twice.
	Extra int64 `json:"extra"`
}

// Repeats is the body of GET /sim/repeats.
type Repeats struct {
	// Tracking says whether the server remembers what it served (Config.TrackRepeats);
	// when false the rest is empty.
	Tracking bool `json:"tracking"`
	RepeatTotals
	// Repeated lists every request served more than once, by first user message.
	Repeated []Repeat `json:"repeated"`
}

// repeats remembers every request served, by its semantic digest. A provider bills every
// answer it generates, so the same request served twice is a call paid twice: the fault
// suite makes each job's prompt unique and reads the repeats to count duplicated provider
// calls. It grows with every distinct request, hence only on with Config.TrackRepeats.
type repeats struct {
	mu    sync.Mutex
	seen  map[[32]byte]*servedRequest
	extra int64
}

type servedRequest struct {
	served    int64
	firstUser string
}

func newRepeats() *repeats { return &repeats{seen: map[[32]byte]*servedRequest{}} }

// served records one answer to the request with digest d.
func (r *repeats) served(d [32]byte, msgs []openai.ChatCompletionMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.seen[d]; ok {
		e.served++
		r.extra++
		return
	}
	r.seen[d] = &servedRequest{served: 1, firstUser: firstUser(msgs)}
}

func (r *repeats) totals() RepeatTotals {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RepeatTotals{Distinct: int64(len(r.seen)), Extra: r.extra}
}

func (r *repeats) list() Repeats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := Repeats{Tracking: true, RepeatTotals: RepeatTotals{Distinct: int64(len(r.seen)), Extra: r.extra},
		Repeated: []Repeat{}}
	for d, e := range r.seen {
		if e.served > 1 {
			out.Repeated = append(out.Repeated, Repeat{Digest: hex.EncodeToString(d[:]), Served: e.served, FirstUser: e.firstUser})
		}
	}
	slices.SortFunc(out.Repeated, func(a, b Repeat) int {
		return strings.Compare(a.FirstUser+a.Digest, b.FirstUser+b.Digest)
	})
	return out
}

func (r *repeats) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = map[[32]byte]*servedRequest{}
	r.extra = 0
}

// firstUser is the text of the first user message, cut at firstUserMax bytes on a rune
// boundary.
func firstUser(msgs []openai.ChatCompletionMessage) string {
	for _, m := range msgs {
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		text := m.Content
		if text == "" {
			for _, p := range m.MultiContent {
				text += p.Text
			}
		}
		if len(text) <= firstUserMax {
			return text
		}
		cut := firstUserMax
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		return text[:cut]
	}
	return ""
}
