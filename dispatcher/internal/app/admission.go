package app

import (
	"context"
	"sync"

	"github.com/hibiken/asynq"
)

// admission decides when a chain may start: only while fewer than n transitions — step
// ends and starts — are being applied in this dispatcher. A chain waiting to start has done
// nothing yet; a running chain waiting between its steps holds its work half done, so when
// the coordinator is the busy stage the running chains go first, and new chains are admitted
// as they make room. When the coordinator is idle — the steps themselves are slow, or
// capacity waits at the provider — every chain starts at once.
type admission struct {
	n       int
	mu      sync.Mutex
	active  int           // transitions being applied
	waiting int           // starts waiting for room
	freed   chan struct{} // closed (and replaced) whenever one ends
}

func newAdmission(n int) *admission { return &admission{n: max(n, 1), freed: make(chan struct{})} }

// steps wraps the handler of step ends and deadlines: they run at once, counted.
func (a *admission) steps(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		a.enter()
		defer a.leave()
		return h.ProcessTask(ctx, t)
	})
}

// starts wraps the handler of chain starts: each waits for room first.
func (a *admission) starts(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		for {
			a.mu.Lock()
			if a.active < a.n {
				a.active++
				a.mu.Unlock()
				break
			}
			freed := a.freed
			a.waiting++
			a.mu.Unlock()
			select {
			case <-freed:
			case <-ctx.Done():
			}
			a.mu.Lock()
			a.waiting--
			a.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		defer a.leave()
		return h.ProcessTask(ctx, t)
	})
}

// Waiting is how many chain starts wait for room.
func (a *admission) Waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting
}

func (a *admission) enter() {
	a.mu.Lock()
	a.active++
	a.mu.Unlock()
}

func (a *admission) leave() {
	a.mu.Lock()
	a.active--
	close(a.freed)
	a.freed = make(chan struct{})
	a.mu.Unlock()
}
