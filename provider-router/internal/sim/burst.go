package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Burst is a run of injected failures, switched on at run time (POST /sim/faults): every
// chat completion request (of Model, or of every model when Model is empty) is answered at
// once with Status, without being charged to the rate limits, until Duration has passed or
// Requests requests have been answered, whichever comes first. It stands for a provider's
// outage (5xx) or a provider that refuses everything for a while (429), as opposed to
// ModelConfig.ErrorRate, which fails a random share of requests all the time.
type Burst struct {
	// Status is 429 or a 5xx status. Required.
	Status int `json:"status"`
	// Duration, in Go syntax ("5s"), is real time on the limit clock (not scaled by
	// time_scale). At least one of Duration and Requests is required.
	Duration string `json:"duration,omitempty"`
	// Requests bounds the burst to that many answered requests; 0 means no bound.
	Requests int64 `json:"requests,omitempty"`
	// Model limits the burst to one configured model; empty means every model.
	Model string `json:"model,omitempty"`
}

// BurstState is the body of GET, POST and DELETE /sim/faults.
type BurstState struct {
	// Active says whether a burst is answering requests now.
	Active bool `json:"active"`
	// Burst is the active burst, or the last one.
	Burst *Burst `json:"burst,omitempty"`
	// EndsInMS is the time left of an active burst bounded by Duration, in milliseconds.
	EndsInMS int64 `json:"ends_in_ms,omitempty"`
	// RemainingRequests is what is left of an active burst bounded by Requests.
	RemainingRequests int64 `json:"remaining_requests,omitempty"`
	// Answered counts the requests answered by bursts since start or the last reset.
	Answered int64 `json:"answered"`
}

// bursts holds the current burst. One mutex: a burst is a fault-injection tool, not a
// benchmark path, and the critical section is a comparison or two.
type bursts struct {
	mu       sync.Mutex
	now      func() time.Time
	cur      *Burst
	until    time.Time // zero: no time bound
	left     int64     // -1: no request bound
	answered int64
}

// start replaces the current burst with b.
func (x *bursts) start(b Burst) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur, x.until, x.left = &b, time.Time{}, -1
	if d, err := time.ParseDuration(b.Duration); err == nil && b.Duration != "" {
		x.until = x.now().Add(d)
	}
	if b.Requests > 0 {
		x.left = b.Requests
	}
}

// stop ends the current burst.
func (x *bursts) stop() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.until, x.left = x.now(), 0
}

// activeLocked reports whether the burst still answers, and how long it has left (0: no
// time bound).
func (x *bursts) activeLocked(now time.Time) (bool, time.Duration) {
	if x.cur == nil || x.left == 0 {
		return false, 0
	}
	if x.until.IsZero() {
		return true, 0
	}
	left := x.until.Sub(now)
	return left > 0, left
}

// take answers a request for model from the burst when one is active for it: the status
// and the time left.
func (x *bursts) take(model string) (int, time.Duration, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	active, left := x.activeLocked(x.now())
	if !active || (x.cur.Model != "" && x.cur.Model != model) {
		return 0, 0, false
	}
	if x.left > 0 {
		x.left--
	}
	x.answered++
	return x.cur.Status, left, true
}

func (x *bursts) state() BurstState {
	x.mu.Lock()
	defer x.mu.Unlock()
	active, left := x.activeLocked(x.now())
	st := BurstState{Active: active, Burst: x.cur, Answered: x.answered}
	if active {
		st.EndsInMS = left.Milliseconds()
		st.RemainingRequests = max(x.left, 0)
	}
	return st
}

func (x *bursts) resetCount() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.answered = 0
}

// startBurst is POST /sim/faults: it checks the burst and starts it.
func (s *Server) startBurst(w http.ResponseWriter, r *http.Request) error {
	var b Burst
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return badRequest("", "the body must be {\"status\": 429|5xx, \"duration\": \"5s\", \"requests\": n, \"model\": \"...\"}: "+err.Error())
	}
	if b.Status != http.StatusTooManyRequests && (b.Status < 500 || b.Status > 599) {
		return badRequest("status", fmt.Sprintf("status %d: a burst answers 429 or a 5xx status", b.Status))
	}
	if b.Duration == "" && b.Requests <= 0 {
		return badRequest("duration", "a burst needs a duration (\"5s\"), a number of requests, or both")
	}
	if b.Duration != "" {
		if d, err := time.ParseDuration(b.Duration); err != nil || d <= 0 {
			return badRequest("duration", fmt.Sprintf("duration %q: want a positive Go duration such as \"5s\"", b.Duration))
		}
	}
	if b.Model != "" && s.models[b.Model] == nil {
		return modelNotFound(b.Model)
	}
	s.bursts.start(b)
	s.log.Info("burst started", "status", b.Status, "duration", b.Duration, "requests", b.Requests, "model", b.Model)
	return writeJSON(w, http.StatusOK, s.bursts.state())
}

// burstError is a burst's answer to one request. A 429 says to retry when the burst
// ends (or in a second when it is bounded by requests only), as a provider's would.
func burstError(h http.Header, status int, left time.Duration) *apiError {
	if status != http.StatusTooManyRequests {
		return injectedFault(status)
	}
	if left <= 0 {
		left = time.Second
	}
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(left.Seconds())))))
	h.Set("retry-after-ms", strconv.FormatInt(left.Milliseconds(), 10))
	return &apiError{status: status, message: "Rate limit reached: the provider refuses every request for now (sim-llm injected burst).",
		typ: limitRequests, code: "rate_limit_exceeded"}
}
