package stream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
)

// outMsg is one item of a client's send buffer.
type outMsg struct {
	env *event.Envelope
	raw []byte
	// resync asks the writer to re-read every subscribed run from the journal (after the
	// Redis subscription was re-established).
	resync bool
}

// request is a client message, or an error the reader hands to the writer.
type request struct {
	Type string `json:"type"` // subscribe | unsubscribe
	Subscribe
	err *controlMsg
}

// controlMsg is what the hub itself says on the stream; its types start with "stream:".
type controlMsg struct {
	Type     string           `json:"type"`
	JobID    string           `json:"job_id,omitempty"`
	ChainID  string           `json:"chain_id,omitempty"`
	Scope    string           `json:"scope,omitempty"`
	Replayed *int             `json:"replayed,omitempty"`
	LastSeq  map[string]int64 `json:"last_seq,omitempty"`
	Code     string           `json:"code,omitempty"`
	Message  string           `json:"message,omitempty"`
}

// conn is one WebSocket client. The feed goroutine only calls offer; the writer goroutine
// owns every data write and the replay state (last, runChain); the reader goroutine only
// reads client messages and hands them to the writer.
type conn struct {
	hub    *Hub
	ws     *websocket.Conn
	client Client
	feed   *feed
	send   chan outMsg
	ctl    chan Subscribe // initial subscriptions, before the reader starts
	reqs   chan request
	done   chan struct{}

	closeOnce   sync.Once
	closeCode   int // set before done is closed
	closeReason string
	dropping    atomic.Bool

	mu       sync.Mutex // guards the subscription set, read by offer
	orgScope bool
	jobs     map[string]bool
	chains   map[string]bool

	last     map[string]int64  // last seq written per run of a job or chain subscription
	runChain map[string]string // cache: run -> chain ("" for none)
}

// offer queues an event for the client if it subscribed to it, or drops the client when
// its buffer is full. It never blocks: one slow client must not slow the feed.
func (c *conn) offer(m outMsg) {
	if !m.resync {
		c.mu.Lock()
		want := c.orgScope || c.jobs[m.env.JobID] || len(c.chains) > 0
		c.mu.Unlock()
		if !want {
			return
		}
	}
	select {
	case c.send <- m:
	default:
		if c.dropping.CompareAndSwap(false, true) {
			c.hub.dropped.Add(1)
			c.hub.Log.Warn("stream_client_dropped", "org_id", c.client.OrgID, "reason", "slow_consumer")
			// The feed holds its lock here and leaving the hub takes it: close from elsewhere.
			go c.closeWith(CloseSlowConsumer, "slow consumer")
		}
	}
}

// closeWith ends the connection with a close code (0: none): it leaves the hub at once, so
// nothing more is offered, and the writer, which owns the socket's writes, sends the close
// frame once its current write returns and then closes the socket.
func (c *conn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		c.closeCode, c.closeReason = code, reason
		close(c.done)
		c.hub.leave(c)
	})
}

// finish runs when the writer stops: the close frame, then the socket (which also ends the
// reader).
func (c *conn) finish() {
	c.closeWith(0, "")
	if c.closeCode != 0 {
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, c.closeReason),
			time.Now().Add(c.hub.WriteTimeout))
	}
	_ = c.ws.Close()
}

func (c *conn) readLoop() {
	defer c.closeWith(0, "")
	wait := 2 * c.hub.PingInterval
	c.ws.SetReadLimit(8 << 10)
	_ = c.ws.SetReadDeadline(time.Now().Add(wait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(wait)) })
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(wait))
		var req request
		if err := json.Unmarshal(data, &req); err != nil || (req.Type != "subscribe" && req.Type != "unsubscribe") {
			req = request{err: &controlMsg{Type: "stream:error", Code: apierr.CodeValidationFailed,
				Message: `Messages are JSON objects with "type": "subscribe" or "unsubscribe"; see docs/streaming.md.`}}
		}
		select {
		case c.reqs <- req:
		case <-c.done:
			return
		}
	}
}

func (c *conn) writeLoop() {
	ticker := time.NewTicker(c.hub.PingInterval)
	defer ticker.Stop()
	defer c.finish()
	for {
		// Initial subscriptions first, so their replay precedes any live event.
		select {
		case s := <-c.ctl:
			if c.subscribe(s) != nil {
				return
			}
			continue
		default:
		}
		var err error
		select {
		case <-c.done:
			return
		case req := <-c.reqs:
			switch {
			case req.err != nil:
				err = c.writeJSON(req.err)
			case req.Type == "unsubscribe":
				err = c.unsubscribe(req.Subscribe)
			default:
				err = c.subscribe(req.Subscribe)
			}
		case m := <-c.send:
			err = c.deliver(m)
		case <-ticker.C:
			err = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.hub.WriteTimeout))
		}
		if err != nil {
			return
		}
	}
}

func (c *conn) write(raw []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.hub.WriteTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, raw)
}

func (c *conn) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.write(b)
}

func (c *conn) fail(code, msg string, s Subscribe) error {
	return c.writeJSON(controlMsg{Type: "stream:error", Code: code, Message: msg, JobID: s.JobID, ChainID: s.ChainID, Scope: s.Scope})
}

func (c *conn) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// subscribe registers a subscription, then replays the journal. Registration comes first,
// so an event published during the replay is either in the replay or in the send buffer
// (or both: deliver skips seqs already written).
func (c *conn) subscribe(s Subscribe) error {
	ctx, cancel := c.ctx()
	defer cancel()
	switch {
	case s.Scope == "org" && s.JobID == "" && s.ChainID == "":
		if !c.client.MayStreamOrg {
			return c.fail(apierr.CodeForbidden, "The organisation stream needs the viewer or admin role.", s)
		}
		c.mu.Lock()
		c.orgScope = true
		c.mu.Unlock()
		return c.writeJSON(controlMsg{Type: "stream:subscribed", Scope: "org"})
	case s.JobID != "" && s.ChainID == "" && s.Scope == "":
		if _, err := uuid.Parse(s.JobID); err != nil {
			return c.fail(apierr.CodeJobNotFound, "No job with that id in your organisation.", s)
		}
		chain, err := c.hub.Store.RunChain(ctx, c.client.OrgID, s.JobID)
		if errors.Is(err, ErrNotFound) {
			return c.fail(apierr.CodeJobNotFound, "No job with that id in your organisation.", s)
		}
		if err != nil {
			c.hub.Log.Error("stream_lookup_failed", "org_id", c.client.OrgID, "job_id", s.JobID, "error", err)
			return c.fail(apierr.CodeDatabaseUnavailable, "The journal could not be read; subscribe again shortly.", s)
		}
		c.runChain[s.JobID] = chain
		c.mu.Lock()
		c.jobs[s.JobID] = true
		c.mu.Unlock()
		c.last[s.JobID] = max(c.last[s.JobID], s.AfterSeq)
		n, err := c.catchUp(ctx, s.JobID, 0)
		if err != nil {
			return err
		}
		return c.writeJSON(controlMsg{Type: "stream:subscribed", JobID: s.JobID, Replayed: &n,
			LastSeq: map[string]int64{s.JobID: c.last[s.JobID]}})
	case s.ChainID != "" && s.JobID == "" && s.Scope == "":
		if _, err := uuid.Parse(s.ChainID); err != nil {
			return c.fail(apierr.CodeChainNotFound, "No chain with that id in your organisation.", s)
		}
		runs, err := c.hub.Store.ChainRuns(ctx, c.client.OrgID, s.ChainID)
		if errors.Is(err, ErrNotFound) {
			return c.fail(apierr.CodeChainNotFound, "No chain with that id in your organisation.", s)
		}
		if err != nil {
			c.hub.Log.Error("stream_lookup_failed", "org_id", c.client.OrgID, "chain_id", s.ChainID, "error", err)
			return c.fail(apierr.CodeDatabaseUnavailable, "The journal could not be read; subscribe again shortly.", s)
		}
		c.mu.Lock()
		c.chains[s.ChainID] = true
		c.mu.Unlock()
		total := 0
		lasts := map[string]int64{}
		for _, run := range runs {
			c.runChain[run] = s.ChainID
			c.last[run] = max(c.last[run], s.AfterSeqs[run])
			n, err := c.catchUp(ctx, run, 0)
			if err != nil {
				return err
			}
			total += n
			lasts[run] = c.last[run]
		}
		return c.writeJSON(controlMsg{Type: "stream:subscribed", ChainID: s.ChainID, Replayed: &total, LastSeq: lasts})
	}
	return c.fail(apierr.CodeValidationFailed, "Subscribe to exactly one of job_id, chain_id or scope=org.", s)
}

func (c *conn) unsubscribe(s Subscribe) error {
	c.mu.Lock()
	switch {
	case s.Scope == "org":
		c.orgScope = false
	case s.JobID != "":
		delete(c.jobs, s.JobID)
	case s.ChainID != "":
		delete(c.chains, s.ChainID)
	}
	c.mu.Unlock()
	return c.writeJSON(controlMsg{Type: "stream:unsubscribed", JobID: s.JobID, ChainID: s.ChainID, Scope: s.Scope})
}

// catchUp writes the run's journaled events after the last one written, up to before
// (0: all), and returns how many it wrote. A database failure is reported to the client,
// which may subscribe again; only a write failure ends the connection.
func (c *conn) catchUp(ctx context.Context, run string, before int64) (int, error) {
	envs, err := c.hub.Store.Replay(ctx, c.client.OrgID, run, c.last[run])
	if err != nil {
		c.hub.Log.Error("stream_replay_failed", "org_id", c.client.OrgID, "job_id", run, "error", err)
		return 0, c.fail(apierr.CodeDatabaseUnavailable, "The journal could not be read; subscribe again with after_seq.", Subscribe{JobID: run})
	}
	n := 0
	for i := range envs {
		if before > 0 && envs[i].Seq >= before {
			break
		}
		b, err := json.Marshal(envs[i])
		if err != nil {
			return n, err
		}
		if err := c.write(b); err != nil {
			return n, err
		}
		c.last[run] = envs[i].Seq
		n++
	}
	return n, nil
}

// tracked reports whether the run's events are replay-tracked: the client subscribed to
// the run or to its chain.
func (c *conn) tracked(run string) bool {
	c.mu.Lock()
	job, hasChains := c.jobs[run], len(c.chains) > 0
	c.mu.Unlock()
	if job || !hasChains {
		return job
	}
	chain, ok := c.runChain[run]
	if !ok {
		ctx, cancel := c.ctx()
		defer cancel()
		var err error
		chain, err = c.hub.Store.RunChain(ctx, c.client.OrgID, run)
		if err != nil && !errors.Is(err, ErrNotFound) {
			c.hub.Log.Warn("stream_lookup_failed", "org_id", c.client.OrgID, "job_id", run, "error", err)
			return false
		}
		if len(c.runChain) > 10000 { // a bounded cache: forget everything rather than grow
			clear(c.runChain)
		}
		c.runChain[run] = chain
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return chain != "" && c.chains[chain]
}

func (c *conn) deliver(m outMsg) error {
	if m.resync {
		return c.resync()
	}
	run := m.env.JobID
	if c.tracked(run) {
		if m.env.Seq <= c.last[run] {
			return nil // already written by a replay
		}
		if m.env.Seq > c.last[run]+1 { // Pub/Sub lost something: the journal has it
			ctx, cancel := c.ctx()
			_, err := c.catchUp(ctx, run, m.env.Seq)
			cancel()
			if err != nil {
				return err
			}
		}
		c.last[run] = m.env.Seq
		return c.write(m.raw)
	}
	c.mu.Lock()
	org := c.orgScope
	c.mu.Unlock()
	if org {
		return c.write(m.raw)
	}
	return nil
}

// resync re-reads every subscribed run and chain from the journal.
func (c *conn) resync() error {
	c.mu.Lock()
	jobs := make([]string, 0, len(c.jobs))
	for j := range c.jobs {
		jobs = append(jobs, j)
	}
	chains := make([]string, 0, len(c.chains))
	for ch := range c.chains {
		chains = append(chains, ch)
	}
	c.mu.Unlock()
	ctx, cancel := c.ctx()
	defer cancel()
	for _, ch := range chains {
		runs, err := c.hub.Store.ChainRuns(ctx, c.client.OrgID, ch)
		if err != nil {
			continue
		}
		for _, r := range runs {
			c.runChain[r] = ch
			if !slices.Contains(jobs, r) {
				jobs = append(jobs, r)
			}
		}
	}
	for _, j := range jobs {
		if _, err := c.catchUp(ctx, j, 0); err != nil {
			return err
		}
	}
	return nil
}
