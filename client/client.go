// Package client is the Go client of the Switchyard dispatcher's public HTTP API
// (docs/api.md), for plugin services and tools such as the yard CLI: dispatch jobs, follow
// them, start, follow, cancel and re-run chains, review held ones and administer skills,
// keys, queues and the organisation.
//
// Every method takes a context. A non-2xx answer is returned as an *APIError carrying the
// dispatcher's structured error body; compare it with the sentinels (ErrJobNotFound,
// ErrRateLimited, ...) through errors.Is. Calls that are safe to repeat — reads, PUT, DELETE,
// cancel, enable/disable and dispatches that carry an idempotency key — are retried with
// exponential backoff on 429 and 503, honouring Retry-After; other calls are never retried,
// so a job is never dispatched twice behind the caller's back.
//
// The client is a Go module of its own (github.com/switchyard-ai/switchyard/client) whose only
// dependency is github.com/gorilla/websocket: `go get github.com/switchyard-ai/switchyard/client`.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one dispatcher with one API key. It is safe for concurrent use.
type Client struct {
	base       *url.URL
	apiKey     string
	http       *http.Client
	userAgent  string
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	pollEvery  time.Duration
	dialer     wsDialer

	// Skills administers the organisation's skill bindings.
	Skills *SkillsService
	// Keys administers the organisation's API keys (role admin).
	Keys *KeysService
	// Queues administers the platform's named queues (role admin).
	Queues *QueuesService
	// Org reads and changes the organisation's settings and usage (role admin).
	Org *OrgService
	// Orgs creates, changes, suspends and resumes organisations (a platform operator key).
	Orgs *OrgsService
	// Providers administers the organisation's providers, API keys, routing, limits and
	// prices (role admin).
	Providers *ProvidersService
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a client with a 30 s timeout).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent header (default "switchyard-go-client").
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetries sets how many times a retryable call is repeated after a 429 or 503 (default
// 3; 0 disables retries) and the bounds of the exponential backoff between attempts
// (default 200 ms to 5 s). A Retry-After header overrides the backoff.
func WithRetries(n int, minBackoff, maxBackoff time.Duration) Option {
	return func(c *Client) { c.maxRetries, c.minBackoff, c.maxBackoff = n, minBackoff, maxBackoff }
}

// WithPollInterval sets how often Watch polls the events endpoint when the WebSocket is
// unavailable (default 500 ms).
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.pollEvery = d } }

// New returns a client of the dispatcher at baseURL (e.g. http://127.0.0.1:8080) that
// authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err == nil {
		u.RawQuery, u.Fragment = "", ""
	}
	if err != nil {
		return nil, fmt.Errorf("parsing dispatcher url %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("dispatcher url %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{
		base: u, apiKey: apiKey, http: &http.Client{Timeout: 30 * time.Second},
		userAgent: "switchyard-go-client", maxRetries: 3,
		minBackoff: 200 * time.Millisecond, maxBackoff: 5 * time.Second, pollEvery: 500 * time.Millisecond,
	}
	for _, o := range opts {
		o(c)
	}
	c.dialer = defaultDialer(c)
	c.Skills = &SkillsService{c: c}
	c.Keys = &KeysService{c: c}
	c.Queues = &QueuesService{c: c}
	c.Org = &OrgService{c: c}
	c.Orgs = &OrgsService{c: c}
	c.Providers = &ProvidersService{c: c}
	return c, nil
}

// request is one API call.
type request struct {
	method string
	path   string // escaped, under the base URL
	query  url.Values
	body   any
	// retryable marks calls that may be repeated without changing the outcome.
	retryable bool
	// okStatus, when set, is filled with the 2xx status the dispatcher answered.
	okStatus *int
}

// do sends r, retrying when allowed, and decodes a 2xx JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("encoding %s %s body: %w", r.method, r.path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, r, body, out)
		if err == nil || !r.retryable || attempt >= c.maxRetries {
			return err
		}
		var ae *APIError
		if !errors.As(err, &ae) || (ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusServiceUnavailable) {
			return err
		}
		wait := ae.RetryAfter
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// backoff is the full-jitter exponential delay before retry attempt+1.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.minBackoff << min(attempt, 16)
	if d <= 0 || d > c.maxBackoff {
		d = c.maxBackoff
	}
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// url joins the base URL and an already escaped path and query.
func (c *Client) url(path string, q url.Values) string {
	s := strings.TrimRight(c.base.String(), "/") + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

func (c *Client) once(ctx context.Context, r request, body []byte, out any) error {
	req, err := c.newRequest(ctx, r.method, r.path, r.query, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading answer of %s %s: %w", r.method, r.path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp, raw)
	}
	if r.okStatus != nil {
		*r.okStatus = resp.StatusCode
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding answer of %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// retryAfter reads a Retry-After header in seconds or as an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// pathEscape escapes one path segment such as a job id or a job type.
func pathEscape(s string) string { return url.PathEscape(s) }

// BaseURL returns the dispatcher's base URL.
func (c *Client) BaseURL() string { return strings.TrimRight(c.base.String(), "/") }
