package runner

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/shared/event"
)

// gpuTelemetry emits job:gpu_metrics now and every GPUInterval until the returned stop is
// called. No sample follows the run's terminal event.
func (x *execution) gpuTelemetry(ctx context.Context) (stop func()) {
	every := x.GPUInterval
	if every <= 0 {
		every = 10 * time.Second
	}
	sample := func(ctx context.Context, phase string) {
		m, err := x.GPU(ctx)
		if err != nil {
			x.log.Warn("sampling gpu telemetry", "error", err)
			return
		}
		x.Event(ctx, event.JobGPUMetrics, map[string]any{"phase": phase, "gpus": m})
	}
	sample(ctx, "start")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				sample(ctx, "running")
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
