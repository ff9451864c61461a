// Package periodic runs a function on a fixed interval in the background, with the
// Start/Stop lifecycle of the long-lived background components.
package periodic

import (
	"context"
	"time"
)

// Loop calls Run every Every until Stop.
type Loop struct {
	Every time.Duration
	Run   func(ctx context.Context)

	cancel context.CancelFunc
	done   chan struct{}
}

// Start begins the loop; the first call happens after one interval.
func (l *Loop) Start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.Run(ctx)
			}
		}
	}()
}

// Stop ends the loop and waits for a running call to return.
func (l *Loop) Stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}
