// Package routerclient is the executor's client for the provider router — the only way an
// executor reaches an LLM. It sends OpenAI Chat Completions bodies with the job's context
// in headers and returns the answer with its billing, or a typed error that says whether
// another attempt may succeed.
package routerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Client calls the router.
type Client struct {
	BaseURL    string // e.g. https://127.0.0.1:8090
	ServiceKey string
	Caller     string // X-Caller-Service, e.g. "executor"
	HTTP       *http.Client
}

// Job is the context sent with each call.
type Job struct {
	OrgID, JobID, TraceID, UserID, JobType, ChainID string
	RoutingHint, ModelOverride, Residency, Priority string
	// Provider pins the call to a provider by name (a "Test connection" probe).
	Provider       string
	CostCeilingUSD *float64
	QueueWaitMS    int64
	// CapacityWait is how long the call may wait in the router for rate-limit capacity
	// before the router answers RATE_LIMIT_WAIT with a time to come back; 0: up to the
	// context's deadline.
	CapacityWait time.Duration
	// StepKey is the call's journal step key ("llm/1", "iter/2/llm"), the same for every
	// attempt of the run: with JobID it names one paid provider call, which the router
	// answers again from its first answer instead of paying for it twice.
	StepKey string
	// SpanID is the id of the llm_call span the call is made under (X-Span-ID): the router
	// records it with the call's usage-ledger row. Empty sends nothing.
	SpanID string
	// ChainPending is, for a chain step, how many of the chain's steps are not yet
	// dispatched (X-Chain-Pending); 0 sends nothing.
	ChainPending int
}

// Answer is the router's answer: an OpenAI ChatCompletion plus billing.
type Answer struct {
	openai.ChatCompletionResponse
	aichat.Billing
	// Replayed says the answer came from the run's journal (an earlier attempt's), not from
	// the router: whatever it caused was announced by that attempt already.
	Replayed bool `json:"-"`
}

// Error is a failed call. Retryable is false for answers that another attempt cannot
// change (validation, budget, residency, routing).
type Error struct {
	Status    int
	Code      string
	Message   string
	Retryable bool
	Body      apierr.Body
	// RetryAfter is when to call again, from the answer's context.retry_after_ms (set with
	// RATE_LIMIT_WAIT).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("provider router: %d %s: %s", e.Status, e.Code, e.Message)
}

// Chat sends one chat request.
func (c *Client) Chat(ctx context.Context, job Job, req openai.ChatCompletionRequest) (*Answer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding chat request: %w", err)
	}
	raw, status, err := c.post(ctx, aichat.Path, job, body)
	if err != nil {
		return nil, err
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, &Error{Status: status, Code: apierr.CodeRouterBadAnswer, Message: err.Error(), Retryable: true}
	}
	return &a, nil
}

// Price asks where a call of job would be routed and what its tokens cost there, without
// making it (the estimate of a run before it starts).
func (c *Client) Price(ctx context.Context, job Job) (aichat.Quote, error) {
	var q aichat.Quote
	raw, status, err := c.post(ctx, aichat.PricePath, job, nil)
	if err != nil {
		return q, err
	}
	if err := json.Unmarshal(raw, &q); err != nil {
		return q, &Error{Status: status, Code: apierr.CodeRouterBadAnswer, Message: err.Error(), Retryable: true}
	}
	return q, nil
}

// post sends body to the router's path with job's context in the headers and returns the
// answer's body and status, or the router's error as an *Error.
func (c *Client) post(ctx context.Context, path string, job Job, body []byte) ([]byte, int, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set(aichat.HeaderServiceKey, c.ServiceKey)
	h.Set(aichat.HeaderCallerService, c.Caller)
	h.Set(aichat.HeaderOrgID, job.OrgID)
	h.Set(aichat.HeaderJobID, job.JobID)
	h.Set(aichat.HeaderTraceID, job.TraceID)
	h.Set(aichat.HeaderRoutingHint, job.RoutingHint)
	setIf(h, aichat.HeaderUserID, job.UserID)
	setIf(h, aichat.HeaderJobType, job.JobType)
	setIf(h, aichat.HeaderChainID, job.ChainID)
	setIf(h, aichat.HeaderModelOverride, job.ModelOverride)
	setIf(h, aichat.HeaderProvider, job.Provider)
	setIf(h, aichat.HeaderResidency, job.Residency)
	setIf(h, aichat.HeaderPriority, job.Priority)
	setIf(h, aichat.HeaderStepKey, job.StepKey)
	setIf(h, aichat.HeaderSpanID, job.SpanID)
	if job.CostCeilingUSD != nil {
		h.Set(aichat.HeaderCostCeiling, fmt.Sprintf("%g", *job.CostCeilingUSD))
	}
	if job.CapacityWait > 0 {
		h.Set(aichat.HeaderCapacityWait, strconv.FormatInt(job.CapacityWait.Milliseconds(), 10))
	}
	if job.ChainPending > 0 {
		h.Set(aichat.HeaderChainPending, strconv.Itoa(job.ChainPending))
	}
	if job.QueueWaitMS > 0 {
		h.Set(aichat.HeaderQueueWaitMS, fmt.Sprint(job.QueueWaitMS))
	}
	if dl, ok := ctx.Deadline(); ok {
		h.Set(aichat.HeaderDeadline, dl.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, &Error{Code: apierr.CodeRouterUnreachable, Message: err.Error(), Retryable: true}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, resp.StatusCode, &Error{Status: resp.StatusCode, Code: apierr.CodeRouterUnreachable, Message: err.Error(), Retryable: true}
	}
	if resp.StatusCode != http.StatusOK {
		var b apierr.Body
		_ = json.Unmarshal(raw, &b)
		if b.Code == "" {
			b.Code = apierr.CodeRouterError
			b.Message = http.StatusText(resp.StatusCode)
		}
		e := &Error{Status: resp.StatusCode, Code: b.Code, Message: b.Message, Body: b,
			Retryable: retryable(resp.StatusCode, b.Code)}
		if ms, ok := b.Context["retry_after_ms"].(float64); ok && ms > 0 {
			e.RetryAfter = time.Duration(ms) * time.Millisecond
		} else if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return nil, resp.StatusCode, e
	}
	return raw, resp.StatusCode, nil
}

// retryable reports whether another attempt may get another answer: a 429 or 5xx answer
// whose code shared/apierr does not mark permanent (a router code such as PROVIDER_REJECTED
// or RATE_LIMIT_DEADLINE is answered with 502 or 429, yet no retry changes it).
func retryable(status int, code string) bool {
	if apierr.Permanent(code) {
		return false
	}
	return status == http.StatusTooManyRequests || status >= 500
}

// IsPermanent reports whether err is a router answer that retrying cannot change.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && !e.Retryable
}

func setIf(h http.Header, k, v string) {
	if v != "" {
		h.Set(k, v)
	}
}
