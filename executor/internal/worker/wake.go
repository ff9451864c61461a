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
// most maxWait — at the start of a look only (hook). A push therefore starts the dequeue at
// once instead of after the rest of a poll interval. wakeup subscribes to the pending lists
// of the queues this process serves, not to every queue's: pushes for other executors' queues
// cost it nothing. Until Redis has confirmed the subscription of every tier of a queue,
// that queue does not wait: asynq polls it as it would without the hook.
//
// The same knowledge saves the round trips of a busy queue: asynq tries the tiers in
// priority order on every look, so each normal-priority task cost two dequeue scripts on
// the empty critical and high tiers before its own. A tier found empty, with no push
// reported since, less than maxWait ago, is answered empty by the hook without asking Redis
// (before). maxWait bounds what a change that reports no push — a queue unpaused —
// can be missed for.
type wakeup struct {
	maxWait time.Duration
	log     *slog.Logger
	stop    chan struct{}
	stopped sync.Once

	mu     sync.Mutex
	byTier map[string]*gate // tier queue name → its named queue's gate
	ps     *redis.PubSub    // the subscription to the tiers' keyspace events, once following
	prefix string           // "__keyspace@<db>__:"
}

// gate is one named queue's idle state across its tiers.
type gate struct {
	tiers []string
	// pushes counts the pushes reported per tier; emptyAt is 1 + the count at which the tier
	// was last found empty (0: not known empty). A tier is idle while the two agree.
	pushes, emptyAt map[string]uint64
	emptySeen       map[string]time.Time // when a dequeue last found the tier empty
	subscribed      map[string]bool      // tiers whose pushes Redis confirmed it reports
	wake            chan struct{}        // closed (and replaced) on every push onto any tier
}

func newWakeup(maxWait time.Duration, log *slog.Logger) *wakeup {
	return &wakeup{maxWait: maxWait, log: log, stop: make(chan struct{}), byTier: map[string]*gate{}}
}

// register makes the named queue's tiers wait when idle, once their pushes are followed.
// Registering again is harmless.
func (w *wakeup) register(tiers []string) {
	w.mu.Lock()
	if len(tiers) == 0 || w.byTier[tiers[0]] != nil {
		w.mu.Unlock()
		return
	}
	g := &gate{tiers: tiers, pushes: map[string]uint64{}, emptyAt: map[string]uint64{},
		emptySeen: map[string]time.Time{}, subscribed: map[string]bool{}, wake: make(chan struct{})}
	for _, t := range tiers {
		w.byTier[t] = g
	}
	ps, channels := w.ps, w.channels(tiers)
	w.mu.Unlock()
	if ps == nil {
		return // follow subscribes to every tier registered by then
	}
	// A failed write is retried with every other channel when the subscription reconnects.
	if err := ps.Subscribe(context.Background(), channels...); err != nil {
		w.log.Warn("following pushes onto a new queue", "tiers", tiers, "error", err)
	}
}

// channels are the keyspace channels of the tiers' pending lists. Hold w.mu.
func (w *wakeup) channels(tiers []string) []string {
	out := make([]string, len(tiers))
	for i, t := range tiers {
		out[i] = w.prefix + "asynq:{" + t + "}:pending"
	}
	return out
}

// close releases every waiting dequeue for good; call it before shutting the servers down.
func (w *wakeup) close() { w.stopped.Do(func() { close(w.stop) }) }

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
// was found empty less than maxWait ago with no push reported since.
func (w *wakeup) before(tier string, wait bool) (pushes uint64, skip bool) {
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
		g.emptySeen[tier] = time.Now()
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

// followed records that Redis reports the pushes onto tier from now on; its queue looks
// again, since pushes made before were not reported.
func (w *wakeup) followed(tier string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.byTier[tier]; g != nil {
		g.subscribed[tier] = true
		g.kick()
	}
}

// lost records that pushes are no longer reported (the subscription broke): no queue waits
// until Redis confirms its tiers again, and every queue looks again now.
func (w *wakeup) lost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, g := range w.byTier {
		clear(g.subscribed)
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

// follow subscribes to the keyspace events of the pending lists of every registered tier
// (and, through register, of every tier registered later) in Redis database db and reports
// pushes until ctx ends.
func (w *wakeup) follow(ctx context.Context, rdb redis.UniversalClient, db int) {
	w.mu.Lock()
	w.prefix = fmt.Sprintf("__keyspace@%d__:", db)
	tiers := make([]string, 0, len(w.byTier))
	for t := range w.byTier {
		tiers = append(tiers, t)
	}
	ps := rdb.Subscribe(ctx, w.channels(tiers)...)
	w.ps = ps
	prefix := w.prefix
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
			if tier, ok := tierOfPendingKey(strings.TrimPrefix(m.Channel, prefix)); ok && m.Kind == "subscribe" {
				w.followed(tier)
			}
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
