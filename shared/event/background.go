package event

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Background publishes envelopes off the caller's path: Publish hands them to one goroutine
// that sends whatever has gathered in one pipelined round trip, in the order handed in. A
// request that journaled its events then answers without waiting for Pub/Sub, and a busy
// process sends one round trip for many events instead of one each.
//
// A publish is best effort either way (the journal holds every event, and a stream client
// that sees a gap in seq reads it from there), so a failed round trip is logged, not
// returned. Close sends what was handed in before it returns.
type Background struct {
	pub  *Publisher
	log  *slog.Logger
	in   chan Envelope
	wg   sync.WaitGroup
	once sync.Once
}

// backgroundQueue bounds the envelopes waiting to be sent; Publish blocks while it is full,
// which slows callers down rather than dropping events. backgroundBatch bounds one round trip.
const (
	backgroundQueue = 4096
	backgroundBatch = 256
	backgroundWait  = 5 * time.Second
)

// NewBackground starts the goroutine that publishes through pub.
func NewBackground(pub *Publisher, log *slog.Logger) *Background {
	b := &Background{pub: pub, log: log, in: make(chan Envelope, backgroundQueue)}
	b.wg.Go(b.run)
	return b
}

// Publish queues envelopes for publishing. It blocks only while the queue is full, until ctx
// ends (then it returns ctx's error and the rest are not published).
func (b *Background) Publish(ctx context.Context, envs ...Envelope) error {
	for _, env := range envs {
		select {
		case b.in <- env:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close publishes what was queued and stops. Publish must not be called after Close.
func (b *Background) Close() {
	b.once.Do(func() { close(b.in) })
	b.wg.Wait()
}

func (b *Background) run() {
	batch := make([]Envelope, 0, backgroundBatch)
	for env := range b.in {
		batch = append(batch[:0], env)
	gather:
		for len(batch) < backgroundBatch {
			select {
			case env, ok := <-b.in:
				if !ok {
					break gather
				}
				batch = append(batch, env)
			default:
				break gather
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), backgroundWait)
		if err := b.pub.Publish(ctx, batch...); err != nil {
			b.log.Warn("publishing events", "events", len(batch), "first_job_id", batch[0].JobID, "error", err)
		}
		cancel()
	}
}
