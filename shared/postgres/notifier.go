package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier is a process's one Postgres connection for LISTEN/NOTIFY. Components subscribe to
// topics (notification channels) with a Handler; the Notifier LISTENs to every subscribed
// topic on a connection of its own (not one of the pool's), delivers each notification to
// the topic's handlers, reconnects with backoff when the connection is lost, and after every
// (re)connection tells each handler to resync: notifications sent while nothing listened are
// lost, so whatever depends on them must be reloaded.
//
// Handlers are called from the Notifier's one goroutine, in order; a slow handler delays
// every topic's notifications, so one that has long work to do should hand it off.
type Notifier struct {
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts, doubling from
	// the one to the other; defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration

	config *pgx.ConnConfig
	log    *slog.Logger

	mu        sync.Mutex
	subs      map[string][]*subscription
	listening map[string]bool    // topics LISTENed on the current connection
	interrupt context.CancelFunc // ends the current wait, so that new topics are LISTENed
	pid       uint32             // the current connection's backend, 0 while down
	cancel    context.CancelFunc
	done      chan struct{}
}

// Handler receives one topic's notifications. Every field is optional.
type Handler struct {
	// Notify is called with the payload of each notification on the topic.
	Notify func(ctx context.Context, payload string)
	// Resync is called each time the topic's LISTEN has become live — first, and after every
	// reconnection: notifications may have been missed, reload what depends on them.
	Resync func(ctx context.Context)
	// Lost is called when the connection is lost: until the next Resync no notification
	// arrives.
	Lost func()
}

type subscription struct {
	topic string
	h     Handler
	live  bool // Resync has run on the current connection
}

// NewNotifier returns a Notifier that connects as pool does; call Start.
func NewNotifier(pool *pgxpool.Pool, log *slog.Logger) *Notifier {
	return &Notifier{config: pool.Config().ConnConfig.Copy(), log: log, subs: map[string][]*subscription{},
		listening: map[string]bool{}}
}

// Subscribe delivers topic's notifications to h from now on and returns a function that
// ends the subscription. Subscribing after Start is allowed: the topic is LISTENed on the
// live connection, then h.Resync runs.
func (n *Notifier) Subscribe(topic string, h Handler) (unsubscribe func()) {
	s := &subscription{topic: topic, h: h}
	n.mu.Lock()
	n.subs[topic] = append(n.subs[topic], s)
	if n.interrupt != nil {
		n.interrupt()
	}
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.subs[topic] = slices.DeleteFunc(n.subs[topic], func(x *subscription) bool { return x == s })
	}
}

// Start connects and LISTENs in the background until Stop. It returns once the first
// attempt has ended: nil when every topic subscribed so far is live and resynced, so no
// notification committed after Start returns is missed; otherwise the attempt's error,
// while the Notifier keeps trying in the background.
func (n *Notifier) Start(ctx context.Context) error {
	ctx, n.cancel = context.WithCancel(ctx)
	n.done = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		defer close(n.done)
		n.run(ctx, first)
	}()
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop closes the connection and returns once no handler runs any more.
func (n *Notifier) Stop() {
	if n.cancel != nil {
		n.cancel()
		<-n.done
	}
}

func (n *Notifier) run(ctx context.Context, first chan<- error) {
	backoff := cmp.Or(n.MinBackoff, 100*time.Millisecond)
	report := func(err error) {
		if first != nil {
			first <- err
			first = nil
		}
	}
	for ctx.Err() == nil {
		err := n.session(ctx, func() { report(nil) })
		report(err)
		n.lost()
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("postgres notifications lost; reconnecting", "error", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, cmp.Or(n.MaxBackoff, 5*time.Second))
		if err == nil || errors.Is(err, errWasLive) {
			backoff = cmp.Or(n.MinBackoff, 100*time.Millisecond)
		}
	}
}

// errWasLive wraps the error that ended a connection that had been live, so the next
// attempt starts from the shortest backoff.
var errWasLive = errors.New("connection was live")

// session runs one connection: LISTEN to every topic, resync, deliver notifications until
// the connection fails or ctx ends. live is called once the first LISTENs are done.
func (n *Notifier) session(ctx context.Context, live func()) error {
	conn, err := pgx.ConnectConfig(ctx, n.config)
	if err != nil {
		return fmt.Errorf("connecting to listen: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	n.mu.Lock()
	n.pid = conn.PgConn().PID()
	clear(n.listening)
	n.mu.Unlock()
	wasLive := false
	for {
		if err := n.listenNew(ctx, conn); err != nil {
			if wasLive {
				err = fmt.Errorf("%w: %w", errWasLive, err)
			}
			return err
		}
		if !wasLive {
			wasLive = true
			live()
		}
		waitCtx, interrupt := context.WithCancel(ctx)
		n.mu.Lock()
		n.interrupt = interrupt
		pending := n.hasPending()
		n.mu.Unlock()
		if pending {
			interrupt() // subscribed while we LISTENed
		}
		msg, err := conn.WaitForNotification(waitCtx)
		interrupt()
		n.mu.Lock()
		n.interrupt = nil
		n.mu.Unlock()
		switch {
		case err == nil:
			n.deliver(ctx, msg.Channel, msg.Payload)
		case waitCtx.Err() != nil && ctx.Err() == nil && !conn.IsClosed():
			// Interrupted for a new subscription; the connection is still good.
		default:
			return fmt.Errorf("%w: waiting for notifications: %w", errWasLive, err)
		}
	}
}

// hasPending reports whether a subscription waits for its LISTEN or its Resync. Hold n.mu.
func (n *Notifier) hasPending() bool {
	for _, subs := range n.subs {
		for _, s := range subs {
			if !s.live {
				return true
			}
		}
	}
	return false
}

// listenNew LISTENs to the topics not yet listened to on conn, then resyncs every
// subscription that is not live on it.
func (n *Notifier) listenNew(ctx context.Context, conn *pgx.Conn) error {
	n.mu.Lock()
	var topics []string
	for t, subs := range n.subs {
		if len(subs) > 0 && !n.listening[t] {
			topics = append(topics, t)
		}
	}
	n.mu.Unlock()
	slices.Sort(topics)
	for _, t := range topics {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{t}.Sanitize()); err != nil {
			return fmt.Errorf("LISTEN %s: %w", t, err)
		}
		n.mu.Lock()
		n.listening[t] = true
		n.mu.Unlock()
	}
	for {
		n.mu.Lock()
		var next *subscription
		for t, subs := range n.subs {
			for _, s := range subs {
				if !s.live && n.listening[t] && next == nil {
					next = s
				}
			}
		}
		if next != nil {
			next.live = true
		}
		n.mu.Unlock()
		if next == nil {
			return nil
		}
		if next.h.Resync != nil {
			next.h.Resync(ctx)
		}
	}
}

// deliver hands a notification to its topic's handlers.
func (n *Notifier) deliver(ctx context.Context, topic, payload string) {
	n.mu.Lock()
	subs := slices.Clone(n.subs[topic])
	n.mu.Unlock()
	for _, s := range subs {
		if s.h.Notify != nil {
			s.h.Notify(ctx, payload)
		}
	}
}

// lost tells every live subscription that the connection is gone.
func (n *Notifier) lost() {
	n.mu.Lock()
	n.pid = 0
	var lost []*subscription
	for _, subs := range n.subs {
		for _, s := range subs {
			if s.live {
				s.live = false
				lost = append(lost, s)
			}
		}
	}
	n.mu.Unlock()
	for _, s := range lost {
		if s.h.Lost != nil {
			s.h.Lost()
		}
	}
}

// PID is the backend process id of the listening connection, 0 while it is down (for
// operators and tests: pg_terminate_backend(PID) forces a reconnection).
func (n *Notifier) PID() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}
