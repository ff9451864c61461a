package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wakeup lets an idle asynq server wait for work instead of polling Redis for it.
//
// asynq looks for a task by running its dequeue script on each priority tier of a named
// queue in turn and, when every tier is empty, sleeps TaskCheckInterval and looks again:
// at 5 ms that is hundreds of scripts a second per idle queue, a steady tenth of a core of
// executor and Redis doing nothing. Wakeup hooks into each asynq server's Redis client
// (go-redis hooks): once every tier of a named queue has been found empty and nothing has been
// pushed onto any of them since, the next dequeue waits until a push onto one of the queue's
// pending lists is announced, or at most maxWait — at the start of a look only (hook). A push
// therefore starts the dequeue at once instead of after the rest of a poll interval.
//
// Pushes are announced on a Pub/Sub channel per asynq queue (wakeChannel), not learnt from
// Redis keyspace events: those need the server setting notify-keyspace-events, which a
// managed Redis may not let a client change. Every producer announces its pushes:
//   - Client.EnqueueContext, through which the dispatcher (dispatches, approvals, the
//     reconciler, batches), the executor (chain-step reports) and the benchmarks enqueue;
//   - RecoverOrphans, in the same script that moves a dead worker's tasks back;
//   - asynq's own server-side scripts that push onto a pending list — the forwarder that
//     makes retries, parked runs and scheduled tasks pending, and the requeue of a task
//     whose server shuts down — which the hook sees run on the server's client and
//     announces for it.
//
// A push that nothing announces (a queue unpaused, a task enqueued by another tool) is
// picked up within maxWait. Wakeup subscribes to the channels of the queues this process
// serves, not to every queue's: pushes for other executors' queues cost it nothing. Until
// Redis has confirmed the subscription of every tier of a queue, that queue does not wait:
// asynq polls it as it would without the hook.
//
// The same knowledge saves the round trips of a busy queue: asynq tries the tiers in
// priority order on every look, so each normal-priority task cost two dequeue scripts on
// the empty critical and high tiers before its own. A tier found empty, with no push
// announced since, less than maxWait ago, is answered empty by the hook without asking Redis
// (before). maxWait bounds what an unannounced push can be missed for.
type Wakeup struct {
	maxWait time.Duration
	log     *slog.Logger
	stop    chan struct{}
	stopped sync.Once

	mu     sync.Mutex
	byTier map[string]*gate      // tier queue name → its named queue's gate
	ps     *redis.PubSub         // the subscription to the tiers' wake channels, once following
	pub    redis.UniversalClient // announces the pushes the hook sees, once following
}

// gate is one named queue's idle state across its tiers.
type gate struct {
	tiers []string
	// pushes counts the pushes announced per tier; emptyAt is 1 + the count at which the tier
	// was last found empty (0: not known empty). A tier is idle while the two agree.
	pushes, emptyAt map[string]uint64
	emptySeen       map[string]time.Time // when a dequeue last found the tier empty
	subscribed      map[string]bool      // tiers whose announcements Redis confirmed it delivers
	wake            chan struct{}        // closed (and replaced) on every push onto any tier
}

// NewWakeup returns a Wakeup whose idle queues look again at least every maxWait. Call
// Follow to receive announcements, Register for each served queue, and add Hook to each
// asynq server's Redis client.
func NewWakeup(maxWait time.Duration, log *slog.Logger) *Wakeup {
	return &Wakeup{maxWait: maxWait, log: log, stop: make(chan struct{}), byTier: map[string]*gate{}}
}

// TierNames are the asynq queues of a named queue's priority tiers, sorted.
func TierNames(name string) []string { return slices.Sorted(maps.Keys(Tiers(name))) }

// Register makes the named queue's tiers wait when idle, once their announcements are
// followed. Registering again is harmless.
func (w *Wakeup) Register(name string) { w.register(TierNames(name)) }

// RegisterQueues is Register for asynq queues without priority tiers that one server
// serves together — the coordinator's — as the tiers of one queue: idle only when all are.
func (w *Wakeup) RegisterQueues(asynqQueues ...string) { w.register(asynqQueues) }

func (w *Wakeup) register(tiers []string) {
	w.mu.Lock()
	if w.byTier[tiers[0]] != nil {
		w.mu.Unlock()
		return
	}
	g := &gate{tiers: tiers, pushes: map[string]uint64{}, emptyAt: map[string]uint64{},
		emptySeen: map[string]time.Time{}, subscribed: map[string]bool{}, wake: make(chan struct{})}
	for _, t := range tiers {
		w.byTier[t] = g
	}
	ps := w.ps
	w.mu.Unlock()
	if ps == nil {
		return // Follow subscribes to every tier registered by then
	}
	// A failed write is retried with every other channel when the subscription reconnects.
	if err := ps.Subscribe(context.Background(), channels(tiers)...); err != nil {
		w.log.Warn("following pushes onto a new queue", "tiers", tiers, "error", err)
	}
}

// Followed reports whether Redis confirmed that it delivers the announcements of every tier
// of the named queue: from then on the queue waits when idle.
func (w *Wakeup) Followed(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.byTier[Tier(name, "normal")]
	return g != nil && len(g.subscribed) == len(g.tiers)
}

// channels are the wake channels of the tiers.
func channels(tiers []string) []string {
	out := make([]string, len(tiers))
	for i, t := range tiers {
		out[i] = wakeChannel(t)
	}
	return out
}

// Close releases every waiting dequeue for good; call it before shutting the servers down.
func (w *Wakeup) Close() { w.stopped.Do(func() { close(w.stop) }) }

// idle reports whether every tier was found empty since its last push.
func (g *gate) idle() bool {
	for _, t := range g.tiers {
		if !g.empty(t) {
			return false
		}
	}
	return true
}

// empty reports whether tier was found empty since its last push.
func (g *gate) empty(tier string) bool {
	e := g.emptyAt[tier]
	return e != 0 && e-1 == g.pushes[tier]
}

// before runs ahead of a dequeue on tier. At the start of a look (wait) it waits while the
// tier's queue is idle. It returns the push count to hand to after, and skip: the dequeue
// can be answered empty without Redis — every tier of the queue is followed, and this one
// was found empty less than maxWait ago with no push announced since.
func (w *Wakeup) before(tier string, wait bool) (pushes uint64, skip bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.byTier[tier]
	if g == nil {
		return 0, false
	}
	followed := len(g.subscribed) == len(g.tiers)
	if wait && followed && g.idle() {
		ch := g.wake
		w.mu.Unlock()
		t := time.NewTimer(w.maxWait)
		select {
		case <-ch:
		case <-t.C:
		case <-w.stop:
		}
		t.Stop()
		w.mu.Lock()
		followed = len(g.subscribed) == len(g.tiers)
	}
	skip = followed && g.empty(tier) && time.Since(g.emptySeen[tier]) < w.maxWait
	return g.pushes[tier], skip
}

// tierCount is how many tiers tier's named queue has (1 for a tier never registered).
func (w *Wakeup) tierCount(tier string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		return len(g.tiers)
	}
	return 1
}

// after records a dequeue's outcome: empty, as of the push count read before it ran.
func (w *Wakeup) after(tier string, pushesBefore uint64, empty bool) {
	if !empty {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.emptyAt[tier] = pushesBefore + 1
		g.emptySeen[tier] = time.Now()
	}
}

// pushed records a push onto tier's pending list and wakes its queue's waiting dequeues.
func (w *Wakeup) pushed(tier string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.pushes[tier]++
		close(g.wake)
		g.wake = make(chan struct{})
	}
}

// followed records that Redis delivers tier's announcements from now on; its queue looks
// again, since pushes announced before were not delivered.
func (w *Wakeup) followed(tier string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.subscribed[tier] = true
		g.kick()
	}
}

// lost records that announcements are no longer delivered (the subscription broke): no
// queue waits until Redis confirms its tiers again, and every queue looks again now.
func (w *Wakeup) lost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, g := range w.byTier {
		clear(g.subscribed)
		if t == g.tiers[0] {
			g.kick()
		}
	}
}

// Kick makes the named queue look again now; a server about to shut down need not wait out
// an idle wait.
func (w *Wakeup) Kick(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[Tier(name, "normal")]; g != nil {
		g.kick()
	}
}

// kick forgets that the tiers were empty and releases the waiting dequeues. Hold w.mu.
func (g *gate) kick() {
	for _, t := range g.tiers {
		g.pushes[t]++
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// announce publishes a push onto tier that the hook saw one of asynq's scripts make.
func (w *Wakeup) announce(ctx context.Context, tier string) {
	w.mu.Lock()
	pub := w.pub
	w.mu.Unlock()
	if pub == nil {
		return
	}
	if err := pub.Publish(context.WithoutCancel(ctx), wakeChannel(tier), "").Err(); err != nil {
		w.log.Warn("announcing a push onto a queue", "queue", tier, "error", err)
	}
}

// Hook returns the go-redis hook for one asynq server's Redis client. Of the dequeue script
// only the start of a look is made to wait: asynq tries every tier in turn, and a look that
// waited at its third tier, woken by a push onto its first, would miss the task and sleep a
// poll interval before the next look.
func (w *Wakeup) Hook() redis.Hook { return &serverHook{w: w, seen: map[string]bool{}} }

// serverHook follows one server's looks. A server dequeues from a single goroutine, so its
// looks never overlap.
type serverHook struct {
	w    *Wakeup
	mu   sync.Mutex
	seen map[string]bool // tiers found empty so far in the current look
}

func (h *serverHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *serverHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *serverHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tier, ok := dequeueTier(cmd.Args())
		if !ok {
			err := next(ctx, cmd)
			if tier, ok := pushTier(cmd); ok && err == nil {
				h.w.announce(ctx, tier)
			}
			return err
		}
		h.mu.Lock()
		first := len(h.seen) == 0
		h.mu.Unlock()
		n, skip := h.w.before(tier, first)
		var err error
		if skip {
			err = redis.Nil // what the script answers for an empty tier
			cmd.SetErr(err)
		} else {
			err = next(ctx, cmd)
			h.w.after(tier, n, errors.Is(err, redis.Nil))
		}
		empty := errors.Is(err, redis.Nil)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.seen[tier] = empty; !empty || len(h.seen) == h.w.tierCount(tier) {
			clear(h.seen) // the look found a task, failed, or tried every tier: the next one starts
		}
		return err
	}
}

// scriptKeys returns the KEYS of an EVAL or EVALSHA command.
func scriptKeys(args []any) ([]string, bool) {
	if len(args) < 3 {
		return nil, false
	}
	if op, _ := args[0].(string); !strings.EqualFold(op, "evalsha") && !strings.EqualFold(op, "eval") {
		return nil, false
	}
	var n int
	if _, err := fmt.Sscan(fmt.Sprint(args[2]), &n); err != nil || n < 0 || len(args) < 3+n {
		return nil, false
	}
	keys := make([]string, n)
	for i := range n {
		keys[i], _ = args[3+i].(string)
	}
	return keys, true
}

// dequeueTier recognises asynq's dequeue script by its four keys — the tier's pending,
// paused, active and lease keys, in that order — and returns the tier's queue name.
func dequeueTier(args []any) (string, bool) {
	keys, ok := scriptKeys(args)
	if !ok || len(keys) != 4 {
		return "", false
	}
	tier, ok := queueOfKey(keys[0], "pending")
	if !ok || keys[1] != pausedKey(tier) || keys[2] != activeKey(tier) || keys[3] != leaseKey(tier) {
		return "", false
	}
	return tier, true
}

// pushTier recognises one of asynq's server-side scripts that may have pushed onto a
// pending list — any script other than the dequeue that names a tier's pending list among
// its KEYS (the forwarder, the requeue at shutdown) — and that did push: it did not fail and
// did not answer 0, which the forwarder answers when it moved nothing.
func pushTier(cmd redis.Cmder) (string, bool) {
	keys, ok := scriptKeys(cmd.Args())
	if !ok {
		return "", false
	}
	for _, k := range keys {
		if tier, ok := queueOfKey(k, "pending"); ok {
			if c, isCmd := cmd.(*redis.Cmd); isCmd {
				if n, err := c.Int64(); err == nil && n == 0 {
					return "", false
				}
			}
			return tier, true
		}
	}
	return "", false
}

// Follow subscribes to the wake channels of every registered tier (and, through Register, of
// every tier registered later) and delivers the announced pushes until ctx ends; rdb also
// announces the pushes the hook sees.
func (w *Wakeup) Follow(ctx context.Context, rdb redis.UniversalClient) {
	w.mu.Lock()
	ps := rdb.Subscribe(ctx, channels(slices.Collect(maps.Keys(w.byTier)))...)
	w.ps, w.pub = ps, rdb
	w.mu.Unlock()
	// Receive does not return when ctx ends; closing the subscription makes it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	defer ps.Close()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.lost()
			w.log.Warn("queue wake-ups lost; idle queues poll until they are back", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if tier, ok := queueOfWakeChannel(m.Channel); ok && m.Kind == "subscribe" {
				w.followed(tier)
			}
		case *redis.Message:
			if tier, ok := queueOfWakeChannel(m.Channel); ok {
				w.pushed(tier)
			}
		}
	}
}

// Announce publishes a push onto an asynq queue's pending list on its wake channel; Client
// calls it after every enqueue that made a task pending.
func Announce(ctx context.Context, rdb redis.UniversalClient, asynqQueue string) error {
	return rdb.Publish(ctx, wakeChannel(asynqQueue), "").Err()
}
