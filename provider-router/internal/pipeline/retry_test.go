package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// attempts is a fake inner link that fails with errs in turn, then answers.
type attempts struct {
	errs   []error
	calls  int
	stream bool // mark the call streamed, as Upstream does once a chunk went out
}

func (a *attempts) Chat(_ context.Context, call *Call) (*Result, error) {
	a.calls++
	call.streamed = a.stream
	if a.calls <= len(a.errs) {
		return nil, a.errs[a.calls-1]
	}
	return &Result{}, nil
}

func retrier(next Chatter) *Retrier {
	return &Retrier{Next: next, Policy: Retry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond},
		Log: slog.New(slog.DiscardHandler)}
}

func newCall() *Call { return &Call{Deadline: time.Now().Add(time.Minute)} }

func TestRetrierRetriesTheProvidersRetryableFailures(t *testing.T) {
	t.Parallel()
	unavailable := &provider.Error{Status: http.StatusServiceUnavailable, Retryable: true}
	next := &attempts{errs: []error{unavailable, unavailable}}
	_, err := retrier(next).Chat(context.Background(), newCall())
	require.NoError(t, err)
	require.Equal(t, 3, next.calls)

	next = &attempts{errs: []error{unavailable, unavailable, unavailable}}
	_, err = retrier(next).Chat(context.Background(), newCall())
	require.Equal(t, "PROVIDER_UNAVAILABLE", apierr.As(err).Code)
	require.Equal(t, 3, next.calls, "no more than Attempts")
	require.ErrorIs(t, err, unavailable)
}

func TestRetrierPassesALinksRefusalOnAsItIs(t *testing.T) {
	t.Parallel()
	open := apierr.New(http.StatusServiceUnavailable, "PROVIDER_CIRCUIT_OPEN", "open").SetHeader("Retry-After", "5")
	next := &attempts{errs: []error{open}}
	_, err := retrier(next).Chat(context.Background(), newCall())
	require.Same(t, open, err)
	require.Equal(t, 1, next.calls)
}

func TestRetrierDoesNotRepeatAStreamThatSentChunks(t *testing.T) {
	t.Parallel()
	cut := &provider.Error{Status: 0, Retryable: true, Message: "connection reset"}
	next := &attempts{errs: []error{cut}, stream: true}
	_, err := retrier(next).Chat(context.Background(), newCall())
	require.Equal(t, "PROVIDER_UNAVAILABLE", apierr.As(err).Code)
	require.Equal(t, 1, next.calls, "another attempt would send the chunks again")
}

func TestRetrierGivesUpWhenThePauseWouldPassTheDeadline(t *testing.T) {
	t.Parallel()
	limited := &provider.Error{Status: http.StatusTooManyRequests, Retryable: true, RetryAfter: time.Hour}
	next := &attempts{errs: []error{limited}}
	_, err := retrier(next).Chat(context.Background(), newCall())
	e := apierr.As(err)
	require.Equal(t, "PROVIDER_RATE_LIMITED", e.Code)
	require.Equal(t, 1, next.calls)
	require.True(t, errors.Is(err, limited))
}
