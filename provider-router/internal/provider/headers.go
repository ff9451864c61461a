package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HeaderSink receives the response headers of the one request made under the context it
// was attached to. The SDKs hide headers on their error paths, and the router needs
// Retry-After and the rate-limit headers from failures most of all, so adapters capture
// them at the transport instead of asking each SDK.
type HeaderSink struct {
	mu     sync.Mutex
	header http.Header
}

type headerSinkKey struct{}

// WithHeaderSink returns a context whose requests, when sent through a client made by
// CaptureClient, store their response headers in the returned sink.
func WithHeaderSink(ctx context.Context) (context.Context, *HeaderSink) {
	s := &HeaderSink{}
	return context.WithValue(ctx, headerSinkKey{}, s), s
}

// Header returns the last response headers captured, or an empty header.
func (s *HeaderSink) Header() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.header == nil {
		return http.Header{}
	}
	return s.header
}

func (s *HeaderSink) set(h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = h.Clone()
}

type captureTransport struct{ base http.RoundTripper }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		if s, ok := req.Context().Value(headerSinkKey{}).(*HeaderSink); ok {
			s.set(resp.Header)
		}
	}
	return resp, err
}

// CaptureClient returns a copy of c (http.DefaultClient's settings when nil) whose
// transport feeds the HeaderSink of each request's context. The copy leaves the caller's
// client untouched, so one client may be shared by several adapters.
func CaptureClient(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = captureTransport{base: base}
	return &cp
}

// RetryAfter reads how long the provider asked the caller to wait: retry-after-ms
// (OpenAI, finer grained) first, then Retry-After as seconds or an HTTP date.
func RetryAfter(h http.Header) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// OpenAIRateLimit reads OpenAI's x-ratelimit-* headers, which OpenRouter and several
// OpenAI-compatible servers also send. Resets are durations such as "1s" or "6m0s".
func OpenAIRateLimit(h http.Header) RateLimit {
	var rl RateLimit
	rl.LimitRequests, rl.Known = headerInt(h, "x-ratelimit-limit-requests", rl.Known)
	rl.LimitTokens, rl.Known = headerInt(h, "x-ratelimit-limit-tokens", rl.Known)
	rl.RemainingRequests, rl.Known = headerInt(h, "x-ratelimit-remaining-requests", rl.Known)
	rl.RemainingTokens, rl.Known = headerInt(h, "x-ratelimit-remaining-tokens", rl.Known)
	rl.ResetRequests = parseReset(h.Get("x-ratelimit-reset-requests"))
	rl.ResetTokens = parseReset(h.Get("x-ratelimit-reset-tokens"))
	return rl
}

func headerInt(h http.Header, name string, known bool) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get(name)))
	if err != nil {
		return 0, known
	}
	return n, true
}

// parseReset accepts a Go-style duration ("1s", "6m0s", "20ms"), plain seconds, or an
// RFC 3339 instant (Anthropic's anthropic-ratelimit-*-reset).
func parseReset(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// AnthropicRateLimit reads Anthropic's anthropic-ratelimit-{requests,tokens}-* headers.
func AnthropicRateLimit(h http.Header) RateLimit {
	var rl RateLimit
	rl.LimitRequests, rl.Known = headerInt(h, "anthropic-ratelimit-requests-limit", rl.Known)
	rl.LimitTokens, rl.Known = headerInt(h, "anthropic-ratelimit-tokens-limit", rl.Known)
	rl.RemainingRequests, rl.Known = headerInt(h, "anthropic-ratelimit-requests-remaining", rl.Known)
	rl.RemainingTokens, rl.Known = headerInt(h, "anthropic-ratelimit-tokens-remaining", rl.Known)
	rl.ResetRequests = parseReset(h.Get("anthropic-ratelimit-requests-reset"))
	rl.ResetTokens = parseReset(h.Get("anthropic-ratelimit-tokens-reset"))
	return rl
}

// Redact removes secret from s. Providers echo (parts of) a rejected key in their error
// messages, and no error may carry a credential.
func Redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// StatusRetryable tells whether another attempt may succeed after an HTTP status: rate
// limits, timeouts and server-side failures (including Anthropic's 529 overloaded).
func StatusRetryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout ||
		status == http.StatusConflict || status >= 500
}

// IsNetwork tells whether err is a transport failure (connection refused or reset, a
// timeout, a stream cut short) rather than an answer or a refusal to send.
func IsNetwork(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
