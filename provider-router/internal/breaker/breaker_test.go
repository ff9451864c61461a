package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

var (
	err500 = &provider.Error{Kind: provider.OpenAI, Status: 502, Retryable: true}
	errNet = &provider.Error{Kind: provider.OpenAI, Status: 0, Retryable: true}
	err429 = &provider.Error{Kind: provider.OpenAI, Status: 429, Retryable: true}
	err400 = &provider.Error{Kind: provider.OpenAI, Status: 400}
)

func fail(err error) func() error { return func() error { return err } }

func TestOpensOnConsecutiveFailuresOnly(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var changes []string
	s := New(Options{Failures: 3, OpenFor: time.Hour, OnStateChange: func(ep string, from, to State) {
		mu.Lock()
		changes = append(changes, fmt.Sprintf("%s:%s->%s", ep, from, to))
		mu.Unlock()
	}})
	ep := "openai/primary"

	// Client errors, 429s and cancellations do not count; a success resets the streak.
	for _, err := range []error{err500, errNet, nil, err500, err429, err400, context.Canceled, err500} {
		_ = s.Do(ep, fail(err))
	}
	require.Equal(t, Closed, s.State(ep))

	refused := errors.New("dial tcp: connection refused")
	require.ErrorIs(t, s.Do(ep, fail(refused)), refused) // 2 in a row
	require.Equal(t, Closed, s.State(ep))
	require.ErrorIs(t, s.Do(ep, fail(refused)), refused) // 3
	require.Equal(t, Open, s.State(ep))

	called := false
	err := s.Do(ep, func() error { called = true; return nil })
	require.ErrorIs(t, err, ErrOpen)
	require.False(t, called, "an open circuit does not call the endpoint")
	require.Equal(t, Closed, s.State("openai/other"), "breakers are per endpoint")
	require.Equal(t, map[string]State{ep: Open, "openai/other": Closed}, s.States())
	mu.Lock()
	require.Equal(t, []string{ep + ":closed->open"}, changes)
	mu.Unlock()
}

func TestHalfOpenProbe(t *testing.T) {
	t.Parallel()
	s := New(Options{Failures: 1, OpenFor: 20 * time.Millisecond})
	ep := "gemini/eu"
	require.Error(t, s.Do(ep, fail(err500)))
	require.Equal(t, Open, s.State(ep))

	require.Eventually(t, func() bool { return s.State(ep) == HalfOpen }, 5*time.Second, time.Millisecond)
	// One probe at a time: a second call while the probe is out is rejected.
	done, err := s.Allow(ep)
	require.NoError(t, err)
	_, err = s.Allow(ep)
	require.ErrorIs(t, err, ErrOpen)
	done(err500) // the probe failed: open again
	require.Equal(t, Open, s.State(ep))

	require.Eventually(t, func() bool { return s.State(ep) == HalfOpen }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Do(ep, fail(nil)))
	require.Equal(t, Closed, s.State(ep))
}

func TestIsFailure(t *testing.T) {
	t.Parallel()
	require.False(t, IsFailure(nil))
	require.True(t, IsFailure(err500))
	require.True(t, IsFailure(errNet))
	require.True(t, IsFailure(fmt.Errorf("calling: %w", err500)))
	require.False(t, IsFailure(err429))
	require.False(t, IsFailure(err400))
	require.True(t, IsFailure(errors.New("read: connection reset")))
}
