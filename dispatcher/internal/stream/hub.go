// Package stream relays an organisation's run events to WebSocket clients: one Redis
// Pub/Sub subscription per organisation per process, fanned out in memory to that
// organisation's clients, with replay from the journal so a client that reconnects with
// its last seq misses nothing and sees nothing twice. docs/streaming.md is the protocol.
package stream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/event"
)

// ErrNotFound is what a Store returns for a run or chain the organisation does not have:
// the store package's sentinel, so store.Live is a Store as it is.
var ErrNotFound = store.ErrNotFound

// ErrClosed is returned by Serve once the hub is closed.
var ErrClosed = errors.New("stream hub closed")

// Store is what the hub reads from Postgres.
type Store interface {
	// Replay returns the run's journaled events with seq > after, in order.
	Replay(ctx context.Context, orgID, runID string, after int64) ([]event.Envelope, error)
	// RunChain returns the run's chain ("" for none), or ErrNotFound.
	RunChain(ctx context.Context, orgID, runID string) (string, error)
	// ChainRuns returns the chain's runs in creation order, or ErrNotFound.
	ChainRuns(ctx context.Context, orgID, chainID string) ([]string, error)
}

// Close codes the hub sends besides the standard ones.
const (
	// CloseSlowConsumer: the client did not read fast enough and its buffer filled.
	CloseSlowConsumer = 4008
	// CloseUnavailable: the event feed (Redis) failed; reconnect with after_seq.
	CloseUnavailable = 4503
)

// Hub fans out Redis Pub/Sub events to WebSocket clients. Create it with its fields set,
// serve clients with Serve, and Close it on shutdown (after the HTTP server stops
// accepting): WebSockets are hijacked connections that http.Server.Shutdown does not close.
type Hub struct {
	Redis redis.UniversalClient
	Store Store
	Log   *slog.Logger
	// SendBuffer is how many events may wait for one client before it is dropped as a slow
	// consumer; default 256.
	SendBuffer int
	// PingInterval is how often the hub pings each client; default 25 s. A client that has
	// not answered (pong or any message) within twice that is closed.
	PingInterval time.Duration
	// WriteTimeout bounds one write to a client; default 10 s.
	WriteTimeout time.Duration
	// CheckOrigin decides on cross-origin upgrades; default: only same-origin browsers.
	CheckOrigin func(r *http.Request) bool

	clients  atomic.Int64
	dropped  atomic.Int64
	feedsNum atomic.Int64

	once     sync.Once
	upgrader websocket.Upgrader
	mu       sync.Mutex
	closed   bool
	feeds    map[string]*feed
	conns    map[*conn]struct{}
}

// Stats are the hub's counters, for metrics.
type Stats struct {
	Clients int64 // connected clients
	Dropped int64 // clients closed as slow consumers since start
	Feeds   int64 // Redis Pub/Sub subscriptions (one per organisation with clients)
}

// Stats returns the current counters.
func (h *Hub) Stats() Stats {
	return Stats{Clients: h.clients.Load(), Dropped: h.dropped.Load(), Feeds: h.feedsNum.Load()}
}

func (h *Hub) init() {
	h.once.Do(func() {
		h.SendBuffer = cmp.Or(h.SendBuffer, 256)
		h.PingInterval = cmp.Or(h.PingInterval, 25*time.Second)
		h.WriteTimeout = cmp.Or(h.WriteTimeout, 10*time.Second)
		h.Log = cmp.Or(h.Log, slog.New(slog.DiscardHandler))
		h.feeds = map[string]*feed{}
		h.conns = map[*conn]struct{}{}
		// Small read buffers and a shared write-buffer pool keep an idle connection cheap:
		// clients send little, and a buffer is only held while a message is being written.
		h.upgrader = websocket.Upgrader{
			ReadBufferSize: 1024, WriteBufferSize: 4096,
			WriteBufferPool: &sync.Pool{}, CheckOrigin: h.CheckOrigin,
		}
	})
}

// Client says who is connecting.
type Client struct {
	OrgID string
	// MayStreamOrg is true for the viewer and admin roles: they may subscribe to scope=org.
	MayStreamOrg bool
}

// Subscribe is a subscription request, from the query string or a client message.
type Subscribe struct {
	JobID    string `json:"job_id,omitempty"`
	ChainID  string `json:"chain_id,omitempty"`
	Scope    string `json:"scope,omitempty"` // "org"
	AfterSeq int64  `json:"after_seq,omitempty"`
	// AfterSeqs gives, for a chain, the last seq the client has of each of its runs.
	AfterSeqs map[string]int64 `json:"after_seqs,omitempty"`
}

// Serve upgrades the request to a WebSocket, subscribes the client to its organisation's
// feed and to subs, and relays events until the client leaves or the hub closes. The
// caller has authenticated the client and validated subs. Serve returns once the
// connection is set up; the relay runs in goroutines of its own.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, cl Client, subs []Subscribe) error {
	h.init()
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return ErrClosed
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader has answered the client with an HTTP error
	}
	c := &conn{
		hub: h, ws: ws, client: cl, send: make(chan outMsg, h.SendBuffer),
		jobs: map[string]bool{}, chains: map[string]bool{}, last: map[string]int64{},
		runChain: map[string]string{}, ctl: make(chan Subscribe, len(subs)), reqs: make(chan request, 16),
		done: make(chan struct{}),
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := h.join(ctx, c); err != nil {
		h.Log.Warn("stream_feed_unavailable", "org_id", cl.OrgID, "error", err)
		c.closeWith(CloseUnavailable, "event feed unavailable")
		c.finish()
		return nil
	}
	for _, s := range subs {
		c.ctl <- s
	}
	go c.writeLoop()
	go c.readLoop()
	return nil
}

// Close closes every client with 1001 (going away) and every Pub/Sub subscription.
func (h *Hub) Close() {
	h.init()
	h.mu.Lock()
	h.closed = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
	}
}

// feed is one organisation's Pub/Sub subscription and its clients.
type feed struct {
	org   string
	ps    *redis.PubSub
	ready chan struct{} // closed once subscribed (or failed: err set)
	err   error
	mu    sync.RWMutex
	conns map[*conn]struct{}
}

func (h *Hub) join(ctx context.Context, c *conn) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	f := h.feeds[c.client.OrgID]
	if f == nil {
		f = &feed{org: c.client.OrgID, ready: make(chan struct{}), conns: map[*conn]struct{}{}}
		f.ps = h.Redis.Subscribe(context.Background(), event.Channel(f.org))
		h.feeds[f.org] = f
		h.feedsNum.Add(1)
		go h.runFeed(f)
	}
	f.mu.Lock()
	f.conns[c] = struct{}{}
	f.mu.Unlock()
	h.conns[c] = struct{}{}
	c.feed = f
	h.clients.Add(1)
	h.mu.Unlock()

	select {
	case <-f.ready:
	case <-ctx.Done():
		h.leave(c)
		return ctx.Err()
	}
	if f.err != nil {
		h.leave(c)
		return f.err
	}
	return nil
}

func (h *Hub) leave(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.conns[c]; !ok {
		return
	}
	delete(h.conns, c)
	h.clients.Add(-1)
	f := c.feed
	f.mu.Lock()
	delete(f.conns, c)
	empty := len(f.conns) == 0
	f.mu.Unlock()
	if empty && h.feeds[f.org] == f {
		delete(h.feeds, f.org)
		h.feedsNum.Add(-1)
		_ = f.ps.Close() // ends runFeed
	}
}

// runFeed confirms the subscription, then hands every message to the organisation's clients.
func (h *Hub) runFeed(f *feed) {
	if _, err := f.ps.Receive(context.Background()); err != nil {
		f.err = fmt.Errorf("subscribing to %s: %w", event.Channel(f.org), err)
		close(f.ready)
		h.mu.Lock()
		if h.feeds[f.org] == f {
			delete(h.feeds, f.org)
			h.feedsNum.Add(-1)
		}
		h.mu.Unlock()
		_ = f.ps.Close()
		return
	}
	close(f.ready)
	for m := range f.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)) {
		switch m := m.(type) {
		case *redis.Subscription:
			// go-redis resubscribes after a lost connection; what was published meanwhile is
			// lost to Pub/Sub, so every client re-reads its runs from the journal. (The first
			// confirmation was consumed by Receive above: any seen here is a resubscription.)
			if m.Kind == "subscribe" {
				h.Log.Info("stream_feed_resubscribed", "org_id", f.org)
				f.each(func(c *conn) { c.offer(outMsg{resync: true}) })
			}
		case *redis.Message:
			var env event.Envelope
			if err := json.Unmarshal([]byte(m.Payload), &env); err != nil || env.OrgID != f.org {
				h.Log.Warn("stream_bad_event", "org_id", f.org)
				continue
			}
			msg := outMsg{env: &env, raw: []byte(m.Payload)}
			f.each(func(c *conn) { c.offer(msg) })
		}
	}
}

func (f *feed) each(fn func(*conn)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for c := range f.conns {
		fn(c)
	}
}
