package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeup lets an idle asynq server wait for work instead of polling Redis for it.
//
// asynq looks for a task by running its dequeue script on each priority tier of a named
// queue in turn and, when every tier is empty, sleeps TaskCheckInterval and looks again:
// at 5 ms that is hundreds of scripts a second per idle queue, a steady tenth of a core of
// executor and Redis doing nothing. wakeup hooks into each asynq server's Redis client
// (go-redis hooks): once every tier of a named queue has been found empty and nothing has been
// pushed onto any of them since, the next dequeue waits until Redis reports a push onto one
// of the queue's pending lists (keyspace notifications, so every producer counts: the
// dispatcher, asynq's forwarder of retries and scheduled tasks, dead-worker recovery), or at
// most maxWait — at the start of a look only (hook). A push therefore starts the dequeue at once instead of after the rest of a
// poll interval. While the subscription is not established, nothing waits: asynq polls as
// it would without the hook.
type wakeup struct {
	maxWait time.Duration
	log     *slog.Logger
	stop    chan struct{}
	stopped sync.Once

	mu     sync.Mutex
	live   bool             // subscribed: pushes are being reported
	byTier map[string]*gate // tier queue name → its named queue's gate
}

// gate is one named queue's idle state across its tiers.
type gate struct {
	tiers []string
	// pushes counts the pushes reported per tier; emptyAt is 1 + the count at which the tier
	// was last found empty (0: not known empty). A tier is idle while the two agree.
	pushes, emptyAt map[string]uint64
	wake            chan struct{} // closed (and replaced) on every push onto any tier
}

func newWakeup(maxWait time.Duration, log *slog.Logger) *wakeup {
	return &wakeup{maxWait: maxWait, log: log, stop: make(chan struct{}), byTier: map[string]*gate{}}
}

// register makes the named queue's tiers wait when idle. Registering again is harmless.
func (w *wakeup) register(tiers []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(tiers) == 0 || w.byTier[tiers[0]] != nil {
		return
	}
	g := &gate{tiers: tiers, pushes: map[string]uint64{}, emptyAt: map[string]uint64{}, wake: make(chan struct{})}
	for _, t := range tiers {
		w.byTier[t] = g
	}
}

// close releases every waiting dequeue for good; call it before shutting the servers down.
func (w *wakeup) close() { w.stopped.Do(func() { close(w.stop) }) }

// idle reports whether every tier was found empty since its last push.
func (g *gate) idle() bool {
	for _, t := range g.tiers {
		if e := g.emptyAt[t]; e == 0 || e-1 != g.pushes[t] {
			return false
		}
	}
	return true
}

// before runs ahead of a dequeue on tier: it waits while the tier's queue is idle, then
// returns the push count to hand to after.
func (w *wakeup) before(tier string) uint64 {
	w.mu.Lock()
	g := w.byTier[tier]
	if g == nil {
		w.mu.Unlock()
		return 0
	}
	if w.live && g.idle() {
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
	}
	n := g.pushes[tier]
	w.mu.Unlock()
	return n
}

// pushes is the number of pushes reported onto tier so far.
func (w *wakeup) pushes(tier string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		return g.pushes[tier]
	}
	return 0
}

// tierCount is how many tiers tier's named queue has (1 for a tier never registered).
func (w *wakeup) tierCount(tier string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		return len(g.tiers)
	}
	return 1
}

// after records a dequeue's outcome: empty, as of the push count read before it ran.
func (w *wakeup) after(tier string, pushesBefore uint64, empty bool) {
	if !empty {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.emptyAt[tier] = pushesBefore + 1
	}
}

// pushed records a push onto tier's pending list and wakes its queue's waiting dequeues.
func (w *wakeup) pushed(tier string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.pushes[tier]++
		close(g.wake)
		g.wake = make(chan struct{})
	}
}

// setLive records whether pushes are being reported. Either way every queue looks again:
// pushes made while the subscription was down were never reported.
func (w *wakeup) setLive(live bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = live
	for t, g := range w.byTier {
		if t == g.tiers[0] {
			g.kick()
		}
	}
}

// kick makes the named queue of these tiers look again now; a server about to shut down
// need not wait out an idle wait.
func (w *wakeup) kick(tiers []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(tiers) > 0 && w.byTier[tiers[0]] != nil {
		w.byTier[tiers[0]].kick()
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

// hook returns the go-redis hook for one asynq server's Redis client. Only the server's
// dequeue script is touched, and only at the start of a look: asynq tries every tier in
// turn, and a look that waited at its third tier, woken by a push onto its first, would
// miss the task and sleep a poll interval before the next look.
func (w *wakeup) hook() redis.Hook { return &serverHook{w: w, seen: map[string]bool{}} }

// serverHook follows one server's looks. A server dequeues from a single goroutine, so its
// looks never overlap.
type serverHook struct {
	w    *wakeup
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
			return next(ctx, cmd)
		}
		h.mu.Lock()
		first := len(h.seen) == 0
		h.mu.Unlock()
		var n uint64
		if first {
			n = h.w.before(tier)
		} else {
			n = h.w.pushes(tier)
		}
		err := next(ctx, cmd)
		empty := errors.Is(err, redis.Nil)
		h.w.after(tier, n, empty)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.seen[tier] = empty; !empty || len(h.seen) == h.w.tierCount(tier) {
			clear(h.seen) // the look found a task, failed, or tried every tier: the next one starts
		}
		return err
	}
}

// dequeueTier recognises asynq's dequeue script by its four keys — the tier's pending,
// paused, active and lease keys, in that order — and returns the tier's queue name.
func dequeueTier(args []any) (string, bool) {
	if len(args) < 7 {
		return "", false
	}
	if op, _ := args[0].(string); !strings.EqualFold(op, "evalsha") && !strings.EqualFold(op, "eval") {
		return "", false
	}
	if fmt.Sprint(args[2]) != "4" {
		return "", false
	}
	pending, _ := args[3].(string)
	tier, ok := tierOfPendingKey(pending)
	if !ok {
		return "", false
	}
	prefix := "asynq:{" + tier + "}:"
	for i, suffix := range []string{"paused", "active", "lease"} {
		if k, _ := args[4+i].(string); k != prefix+suffix {
			return "", false
		}
	}
	return tier, true
}

// tierOfPendingKey returns q of "asynq:{q}:pending".
func tierOfPendingKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "asynq:{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}:pending")
}

// pushEvents are the keyspace events that put an element on a list (LMOVE, RPOPLPUSH and
// their blocking forms report lpush or rpush on the destination).
var pushEvents = map[string]bool{"lpush": true, "rpush": true, "linsert": true, "lset": true}

// follow subscribes to the keyspace events of every asynq pending list in Redis database db
// and reports pushes until ctx ends.
func (w *wakeup) follow(ctx context.Context, rdb redis.UniversalClient, db int) {
	prefix := fmt.Sprintf("__keyspace@%d__:", db)
	ps := rdb.PSubscribe(ctx, prefix+"asynq:{*}:pending")
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
			w.setLive(false)
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
			w.setLive(m.Kind == "psubscribe")
		case *redis.Message:
			if tier, ok := tierOfPendingKey(strings.TrimPrefix(m.Channel, prefix)); ok && pushEvents[m.Payload] {
				w.pushed(tier)
			}
		}
	}
}

// enableKeyspaceEvents makes sure Redis publishes keyspace events for list commands
// (notify-keyspace-events K and l, or K and A), adding them to whatever is configured.
// It fails where CONFIG is not allowed; configure the server then.
func enableKeyspaceEvents(ctx context.Context, rdb redis.UniversalClient) error {
	cur, err := rdb.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		return err
	}
	v := cur["notify-keyspace-events"]
	if strings.Contains(v, "K") && (strings.Contains(v, "l") || strings.Contains(v, "A")) {
		return nil
	}
	for _, c := range "Kl" {
		if !strings.ContainsRune(v, c) {
			v += string(c)
		}
	}
	return rdb.ConfigSet(ctx, "notify-keyspace-events", v).Err()
}
