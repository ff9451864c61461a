package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// wsDialer opens the event stream; nil means Watch only polls.
type wsDialer func(ctx context.Context, rawURL string, h http.Header) (*websocket.Conn, error)

func defaultDialer(c *Client) wsDialer {
	if c.dialer != nil {
		return c.dialer
	}
	d := &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second}
	if t, ok := c.http.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		d.TLSClientConfig = t.TLSClientConfig.Clone()
	}
	return func(ctx context.Context, rawURL string, h http.Header) (*websocket.Conn, error) {
		conn, resp, err := d.DialContext(ctx, rawURL, h)
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if err != nil && resp != nil {
			return nil, fmt.Errorf("opening event stream: %w (HTTP %d)", err, resp.StatusCode)
		}
		return conn, err
	}
}

// WithPollingOnly makes Watch poll the events endpoint instead of opening the WebSocket,
// for networks whose proxies refuse WebSocket upgrades.
func WithPollingOnly() Option {
	return func(c *Client) {
		c.dialer = func(context.Context, string, http.Header) (*websocket.Conn, error) {
			return nil, errors.New("websocket disabled by WithPollingOnly")
		}
	}
}

// Watch follows a job's events with seq greater than afterSeq, in order and without gaps,
// until the job's terminal event (job:completed, job:failed, job:cancelled, job:rejected),
// which it yields last. It streams over the WebSocket GET /api/v1/stream?job_id=&after_seq=
// (the dispatcher replays the journal from afterSeq first); when the socket cannot be
// opened or drops, it continues by polling GET /api/v1/dispatch/{id}/events?after= from the
// last event seen, so nothing is missed or repeated. An error is yielded once and ends the
// sequence; breaking out of the loop or cancelling ctx stops watching.
func (c *Client) Watch(ctx context.Context, jobID string, afterSeq int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		w := &watch{c: c, jobID: jobID, last: afterSeq, yield: yield}
		// A finished job's remaining events are all in the journal, and a stream of it
		// would wait forever when its terminal event is at or before afterSeq: read it
		// by polling, which also reports a missing job as JOB_NOT_FOUND.
		if r, err := c.Get(ctx, jobID); err != nil || r.Status.Terminal() || !w.socket(ctx) {
			w.poll(ctx)
		}
	}
}

// watch is the state of one Watch: the last seq delivered and the caller's yield.
type watch struct {
	c     *Client
	jobID string
	last  int64
	yield func(Event, error) bool
}

// deliver yields e unless already seen; it reports whether watching is over.
func (w *watch) deliver(e Event) (done bool) {
	if e.Seq <= w.last {
		return false
	}
	w.last = e.Seq
	return !w.yield(e, nil) || e.Terminal()
}

func (w *watch) fail(ctx context.Context, err error) { yieldErr(ctx, w.yield, err) }

// yieldErr yields ctx's error when it is done, else err; watching is then over.
func yieldErr(ctx context.Context, yield func(Event, error) bool, err error) {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	yield(Event{}, err)
}

// socket follows the stream; it reports whether watching is over (false: fall back to
// polling).
func (w *watch) socket(ctx context.Context) (done bool) {
	q := url.Values{"job_id": {w.jobID}, "after_seq": {strconv.FormatInt(w.last, 10)}}
	return w.c.stream(ctx, q, nil, func(e Event) bool {
		// Other jobs' events are not this job's events.
		return e.JobID == w.jobID && w.deliver(e)
	}, w.fail)
}

// stream reads the WebSocket event stream subscribed by query — and by msg, sent once
// connected, when it is not nil — and hands each event to deliver until deliver reports
// that watching is over. It reports whether watching is over: false when the socket could
// not be opened, dropped or refused the subscription (stream:error), and the caller goes
// on by polling from the last event it saw. When ctx ends it reports ctx's error to fail.
func (c *Client) stream(ctx context.Context, query url.Values, msg any, deliver func(Event) (done bool), fail func(context.Context, error)) (done bool) {
	u := *c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = strings.TrimRight(u.Path, "/") + "/api/v1/stream"
	u.RawQuery = query.Encode()
	h := http.Header{"User-Agent": {c.userAgent}}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	failed := func(err error) bool {
		if ctx.Err() == nil {
			return false
		}
		fail(ctx, err)
		return true
	}
	conn, err := c.dialer(ctx, u.String(), h)
	if err != nil {
		return failed(err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if msg != nil {
		if err := conn.WriteJSON(msg); err != nil {
			return failed(err)
		}
	}
	for {
		_, raw, err := conn.ReadMessage()
		if err != nil {
			return failed(err)
		}
		var e Event
		if err := json.Unmarshal(raw, &e); err != nil {
			continue
		}
		if e.Type == "stream:error" {
			// The stream refused or lost the subscription (unknown job, journal
			// unreadable): polling continues from the last seq and reports a lasting
			// failure as the HTTP API's structured error.
			return false
		}
		if strings.HasPrefix(e.Type, "stream:") {
			continue // other control frames
		}
		if deliver(e) {
			return true
		}
	}
}

// poll reads the journal until the job's terminal event. When no events come and the run
// is already terminal (its terminal event was at or before afterSeq), it stops too.
func (w *watch) poll(ctx context.Context) {
	t := time.NewTicker(w.c.pollEvery)
	defer t.Stop()
	for {
		evs, err := w.c.Events(ctx, w.jobID, w.last)
		if err != nil {
			w.fail(ctx, err)
			return
		}
		for _, e := range evs {
			if w.deliver(e) {
				return
			}
		}
		if len(evs) == 0 {
			r, err := w.c.Get(ctx, w.jobID)
			if err != nil {
				w.fail(ctx, err)
				return
			}
			if r.Status.Terminal() {
				// Catch a terminal event journaled between the two reads.
				evs, err := w.c.Events(ctx, w.jobID, w.last)
				if err != nil {
					w.fail(ctx, err)
					return
				}
				for _, e := range evs {
					if w.deliver(e) {
						return
					}
				}
				return
			}
		}
		if !tick(ctx, t, w.fail) {
			return
		}
	}
}

// tick waits for t's next tick; it reports false, having told fail, when ctx ends first.
func tick(ctx context.Context, t *time.Ticker, fail func(context.Context, error)) bool {
	select {
	case <-ctx.Done():
		fail(ctx, ctx.Err())
		return false
	case <-t.C:
		return true
	}
}
