// Package breaker keeps the router from sending calls to a provider endpoint that is
// failing: a circuit breaker per endpoint opens after consecutive server errors or network
// failures, rejects calls at once while open, and lets a probe through after a pause to see
// whether the endpoint recovered. The state machine is github.com/sony/gobreaker/v2; this
// package decides what counts as a failure and keeps one breaker per endpoint.
package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// State is a breaker's state, as exported to metrics.
type State string

// The states.
const (
	Closed   State = "closed"    // calls flow
	Open     State = "open"      // calls are rejected with ErrOpen
	HalfOpen State = "half-open" // a limited number of probe calls decide
)

func fromLib(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// ErrOpen is returned, wrapped with the endpoint, for calls rejected by an open breaker
// (or by a half-open one whose probes are all out).
var ErrOpen = errors.New("breaker: circuit open")

// Options configure a Set. The zero value is usable.
type Options struct {
	// Failures is how many consecutive failures open the circuit. Default 5.
	Failures uint32
	// OpenFor is how long an open circuit rejects calls before letting probes through.
	// Default 30 s.
	OpenFor time.Duration
	// Probes is how many calls a half-open circuit lets through at once; all must succeed
	// to close it, one failure opens it again. Default 1.
	Probes uint32
	// OnStateChange, when set, is called on every transition (for metrics and logs). It
	// runs under the breaker's lock: keep it short.
	OnStateChange func(endpoint string, from, to State)
}

// Set holds one breaker per endpoint. It is safe for concurrent use.
type Set struct {
	opts Options
	mu   sync.Mutex
	m    map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]
}

// New returns an empty Set.
func New(opts Options) *Set {
	opts.Failures = cmp.Or(opts.Failures, 5)
	opts.OpenFor = cmp.Or(opts.OpenFor, 30*time.Second)
	opts.Probes = cmp.Or(opts.Probes, 1)
	return &Set{opts: opts, m: make(map[string]*gobreaker.TwoStepCircuitBreaker[struct{}])}
}

func (s *Set) get(endpoint string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	s.mu.Lock()
	defer s.mu.Unlock()
	cb := s.m[endpoint]
	if cb == nil {
		cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        endpoint,
			MaxRequests: s.opts.Probes,
			Timeout:     s.opts.OpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= s.opts.Failures },
			IsSuccessful: func(err error) bool {
				return !IsFailure(err)
			},
			IsExcluded: excluded,
			OnStateChange: func(name string, from, to gobreaker.State) {
				if s.opts.OnStateChange != nil {
					s.opts.OnStateChange(name, fromLib(from), fromLib(to))
				}
			},
		})
		s.m[endpoint] = cb
	}
	return cb
}

// IsFailure reports whether err says the endpoint is unhealthy: a network failure or a
// 5xx. A 4xx, including 429, is a healthy endpoint refusing one request (429s are the rate
// limiter's business), so it does not count.
func IsFailure(err error) bool {
	if err == nil {
		return false
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Status == 0 || pe.Status >= 500
	}
	return true
}

// excluded leaves out calls the caller abandoned: they say nothing about the endpoint.
func excluded(err error) bool {
	return errors.Is(err, context.Canceled)
}

// Allow asks to make one call to endpoint. If allowed, the caller must call done with the
// call's error (nil on success); otherwise the error wraps ErrOpen.
func (s *Set) Allow(endpoint string) (done func(err error), err error) {
	done, err = s.get(endpoint).Allow()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, ErrOpen)
	}
	return done, nil
}

// Do runs fn through endpoint's breaker and returns its error, or an error wrapping
// ErrOpen without running it.
func (s *Set) Do(endpoint string, fn func() error) error {
	done, err := s.Allow(endpoint)
	if err != nil {
		return err
	}
	err = fn()
	done(err)
	return err
}

// State returns endpoint's state (Closed for an endpoint never called). An open breaker
// reports HalfOpen once OpenFor has passed, even before a probe arrives.
func (s *Set) State(endpoint string) State {
	return fromLib(s.get(endpoint).State())
}

// States returns every known endpoint's state, for metrics.
func (s *Set) States() map[string]State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]State, len(s.m))
	for ep, cb := range s.m {
		out[ep] = fromLib(cb.State())
	}
	return out
}
