package sim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limit kinds, as OpenAI names them in the "type" of a 429 error body.
const (
	limitRequests = "requests"
	limitTokens   = "tokens"
)

// bucket is a token bucket of capacity units refilling continuously at rate units per
// second of real time. OpenAI documents its limits as continuously replenished rather than
// reset at minute boundaries, and a bucket needs no per-request history, so admission is
// O(1) under any load.
type bucket struct {
	capacity float64
	rate     float64 // units per real second
	level    float64
	last     time.Time
}

func newBucket(perWindow int, window time.Duration, now time.Time) *bucket {
	c := float64(perWindow)
	return &bucket{capacity: c, rate: c / window.Seconds(), level: c, last: now}
}

func (b *bucket) refill(now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.level = math.Min(b.capacity, b.level+dt*b.rate)
	}
	b.last = now
}

// until is how long until the bucket holds n units.
func (b *bucket) until(n float64) time.Duration {
	if b.level >= n {
		return 0
	}
	return time.Duration((n - b.level) / b.rate * float64(time.Second))
}

// limiter enforces one model's RPM and TPM. One mutex guards both buckets so that a
// request is admitted by both or charged to neither; the critical section is a few
// float operations, which is cheap next to an HTTP request even at thousands of
// concurrent callers.
type limiter struct {
	mu     sync.Mutex
	rpm    int
	tpm    int
	window time.Duration // one minute times the time scale
	now    func() time.Time
	req    *bucket // nil: unlimited
	tok    *bucket // nil: unlimited
}

func newLimiter(rpm, tpm int, window time.Duration, now func() time.Time) *limiter {
	l := &limiter{rpm: rpm, tpm: tpm, window: window, now: now}
	l.reset()
	return l
}

// reset fills both buckets, as if the model had been idle for a minute.
func (l *limiter) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.req, l.tok = nil, nil
	if l.rpm > 0 {
		l.req = newBucket(l.rpm, l.window, now)
	}
	if l.tpm > 0 {
		l.tok = newBucket(l.tpm, l.window, now)
	}
}

// decision is the outcome of one admission and what the response headers report.
type decision struct {
	ok         bool
	kind       string        // limitRequests or limitTokens when refused
	retryAfter time.Duration // when refused
	message    string        // when refused

	limitReq, limitTok         int // 0: unlimited, no headers
	remainingReq, remainingTok int
	resetReq, resetTok         time.Duration
}

// admit charges one request and tokens tokens, or refuses without charging anything.
func (l *limiter) admit(model string, tokens int) decision {
	if l.rpm == 0 && l.tpm == 0 { // immutable, so no lock for the unlimited fast path
		return decision{ok: true}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d := decision{ok: true, limitReq: l.rpm, limitTok: l.tpm}
	if l.req != nil {
		l.req.refill(now)
		if l.req.level < 1 {
			d.ok, d.kind = false, limitRequests
			d.retryAfter = l.req.until(1)
			d.message = fmt.Sprintf("Rate limit reached for %s in organization sim-llm on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.",
				model, l.rpm, l.rpm-int(math.Floor(l.req.level)), formatReset(d.retryAfter))
		}
	}
	if d.ok && l.tok != nil {
		l.tok.refill(now)
		need := float64(tokens)
		switch {
		case need > l.tok.capacity:
			// It can never fit; say so rather than send the client into a retry loop with
			// a hopeful Retry-After.
			d.ok, d.kind = false, limitTokens
			d.retryAfter = l.window
			d.message = fmt.Sprintf("Request too large for %s in organization sim-llm on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.",
				model, l.tpm, tokens)
		case l.tok.level < need:
			d.ok, d.kind = false, limitTokens
			d.retryAfter = l.tok.until(need)
			d.message = fmt.Sprintf("Rate limit reached for %s in organization sim-llm on tokens per min (TPM): Limit %d, Used %d, Requested %d. Please try again in %s.",
				model, l.tpm, l.tpm-int(math.Floor(l.tok.level)), tokens, formatReset(d.retryAfter))
		}
	}
	if d.ok {
		if l.req != nil {
			l.req.level--
		}
		if l.tok != nil {
			l.tok.level -= float64(tokens)
		}
	}
	if l.req != nil {
		d.remainingReq = int(math.Floor(l.req.level))
		d.resetReq = l.req.until(l.req.capacity)
	}
	if l.tok != nil {
		d.remainingTok = int(math.Floor(l.tok.level))
		d.resetTok = l.tok.until(l.tok.capacity)
	}
	return d
}

// setHeaders writes OpenAI's x-ratelimit-* headers, and on a refusal Retry-After (whole
// seconds, rounded up, as HTTP requires) and retry-after-ms. Durations are real time, the
// time a client actually has to wait, whatever the time scale.
func (d decision) setHeaders(h http.Header) {
	if d.limitReq > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(d.limitReq))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(d.remainingReq))
		h.Set("x-ratelimit-reset-requests", formatReset(d.resetReq))
	}
	if d.limitTok > 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.Itoa(d.limitTok))
		h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(d.remainingTok))
		h.Set("x-ratelimit-reset-tokens", formatReset(d.resetTok))
	}
	if !d.ok {
		secs := int64(math.Ceil(d.retryAfter.Seconds()))
		h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		ms := int64(math.Ceil(float64(d.retryAfter) / float64(time.Millisecond)))
		h.Set("retry-after-ms", strconv.FormatInt(max(ms, 1), 10))
	}
}

// formatReset formats a duration as OpenAI's reset headers do ("1s", "6m0s", "120ms"):
// Go's Duration.String at millisecond resolution, rounded up so that a client waiting
// that long finds the capacity there.
func formatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond).String()
}
