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

// fail yields ctx's error when it is done, else err; watching is then over.
func (w *watch) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	w.yield(Event{}, err)
}

// socket follows the stream; it reports whether watching is over (false: fall back to
// polling).
func (w *watch) socket(ctx context.Context) (done bool) {
	u := *w.c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = strings.TrimRight(u.Path, "/") + "/api/v1/stream"
	u.RawQuery = url.Values{"job_id": {w.jobID}, "after_seq": {strconv.FormatInt(w.last, 10)}}.Encode()
	h := http.Header{"User-Agent": {w.c.userAgent}}
	if w.c.apiKey != "" {
		h.Set("Authorization", "Bearer "+w.c.apiKey)
	}
	conn, err := w.c.dialer(ctx, u.String(), h)
	if err != nil {
		return ctx.Err() != nil && w.failed(ctx, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return ctx.Err() != nil && w.failed(ctx, err)
		}
		var e Event
		if err := json.Unmarshal(msg, &e); err != nil {
			continue
		}
		if e.Type == "stream:error" {
			// The stream refused or lost the subscription (unknown job, journal
			// unreadable): polling continues from the last seq and reports a lasting
			// failure as the HTTP API's structured error.
			return false
		}
		if strings.HasPrefix(e.Type, "stream:") || e.JobID != w.jobID {
			// Other control frames, and other jobs' events, are not this job's events.
			continue
		}
		if w.deliver(e) {
			return true
		}
	}
}

// failed reports err and returns true, for one-line returns.
func (w *watch) failed(ctx context.Context, err error) bool {
	w.fail(ctx, err)
	return true
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
		select {
		case <-ctx.Done():
			w.fail(ctx, ctx.Err())
			return
		case <-t.C:
		}
	}
}
