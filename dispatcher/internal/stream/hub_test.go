package stream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/stream"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

type bundle struct {
	t      *testing.T
	pool   *pgxpool.Pool
	rdb    *redis.Client
	hub    *stream.Hub
	srv    *httptest.Server
	pub    *event.Publisher
	orgA   string
	orgB   string
	ctx    context.Context
	cancel context.CancelFunc
}

// setup starts a hub behind a test server that takes the organisation from X-Org and the
// org-stream permission from X-Viewer, standing in for the API's authentication.
func setup(t *testing.T, hub *stream.Hub) *bundle {
	t.Helper()
	_, pool := testkit.DB(t)
	_, rdb := testkit.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b := &bundle{t: t, pool: pool, rdb: rdb, pub: &event.Publisher{Redis: rdb}, ctx: ctx, cancel: cancel}
	var err error
	b.orgA, err = bootstrap.EnsureOrg(ctx, pool, "org-a", "A", "eu")
	require.NoError(t, err)
	b.orgB, err = bootstrap.EnsureOrg(ctx, pool, "org-b", "B", "eu")
	require.NoError(t, err)
	hub.Redis, hub.Store = rdb, store.Live{DB: pool}
	b.hub = hub
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var subs []stream.Subscribe
		after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
		if q.Get("job_id") != "" {
			subs = append(subs, stream.Subscribe{JobID: q.Get("job_id"), AfterSeq: after})
		}
		if q.Get("chain_id") != "" {
			subs = append(subs, stream.Subscribe{ChainID: q.Get("chain_id")})
		}
		if q.Get("scope") != "" {
			subs = append(subs, stream.Subscribe{Scope: q.Get("scope")})
		}
		cl := stream.Client{OrgID: r.Header.Get("X-Org"), MayStreamOrg: r.Header.Get("X-Viewer") == "1"}
		if err := hub.Serve(w, r, cl, subs); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() { hub.Close(); b.srv.Close() })
	return b
}

func (b *bundle) run(org string) string {
	b.t.Helper()
	id := uuid.NewString()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
			execution_type, queue, status, payload) VALUES ($1, $2, gen_random_uuid(), 'demo_llm', 1, '{}', 'llm_only',
			'default', 'queued', '{}')`, id, org)
	require.NoError(b.t, err)
	return id
}

func (b *bundle) emit(org, run string, i int) {
	b.t.Helper()
	env, err := runstore.New(b.pool).RecordEvent(b.ctx, run, org, event.JobProgress, map[string]any{"i": i})
	require.NoError(b.t, err)
	require.NoError(b.t, b.pub.Publish(b.ctx, env))
}

type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (b *bundle) dial(org string, viewer bool, query string, dialer *websocket.Dialer) *client {
	b.t.Helper()
	h := http.Header{"X-Org": {org}}
	if viewer {
		h.Set("X-Viewer", "1")
	}
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	ws, resp, err := dialer.Dial("ws"+strings.TrimPrefix(b.srv.URL, "http")+"/?"+query, h)
	require.NoError(b.t, err)
	resp.Body.Close()
	b.t.Cleanup(func() { ws.Close() })
	return &client{t: b.t, ws: ws}
}

type msg struct {
	Type    string           `json:"type"`
	JobID   string           `json:"job_id"`
	OrgID   string           `json:"org_id"`
	Seq     int64            `json:"seq"`
	Code    string           `json:"code"`
	Scope   string           `json:"scope"`
	LastSeq map[string]int64 `json:"last_seq"`
}

func (c *client) next() msg {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(15*time.Second)))
	var m msg
	require.NoError(c.t, c.ws.ReadJSON(&m))
	return m
}

// until reads messages until one of type typ arrives and returns the events before it.
func (c *client) until(typ string) []msg {
	c.t.Helper()
	var got []msg
	for {
		m := c.next()
		if m.Type == typ {
			return got
		}
		got = append(got, m)
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteJSON(v))
}

func seqs(ms []msg) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestReplayThenLiveWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	run := b.run(b.orgA)
	for i := 1; i <= 5; i++ {
		b.emit(b.orgA, run, i)
	}
	// Events keep arriving while the client connects and is replayed to.
	emitted := make(chan struct{})
	go func() {
		defer close(emitted)
		for i := 6; i <= 40; i++ {
			env, err := runstore.New(b.pool).RecordEvent(b.ctx, run, b.orgA, event.JobProgress, map[string]any{"i": i})
			if err != nil || b.pub.Publish(b.ctx, env) != nil {
				return
			}
		}
	}()
	c := b.dial(b.orgA, false, "job_id="+run+"&after_seq=2", nil)
	var got []msg
	for len(got) == 0 || got[len(got)-1].Seq < 40 {
		m := c.next()
		if m.Type == "stream:subscribed" {
			continue
		}
		require.Equal(t, run, m.JobID)
		got = append(got, m)
	}
	<-emitted
	require.Equal(t, span(3, 40), seqs(got))
}

func TestReconnectResumesFromLastSeq(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	run := b.run(b.orgA)
	b.emit(b.orgA, run, 1)
	c := b.dial(b.orgA, false, "job_id="+run, nil)
	require.Equal(t, []int64{1}, seqs(c.until("stream:subscribed")))
	b.emit(b.orgA, run, 2)
	require.Equal(t, int64(2), c.next().Seq)
	require.NoError(t, c.ws.Close())

	// Missed while disconnected.
	b.emit(b.orgA, run, 3)
	b.emit(b.orgA, run, 4)
	c2 := b.dial(b.orgA, false, "", nil)
	c2.send(map[string]any{"type": "subscribe", "job_id": run, "after_seq": 2})
	require.Equal(t, []int64{3, 4}, seqs(c2.until("stream:subscribed")))
	b.emit(b.orgA, run, 5)
	require.Equal(t, int64(5), c2.next().Seq)
}

func TestGapInPubSubIsFilledFromTheJournal(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	run := b.run(b.orgA)
	c := b.dial(b.orgA, false, "job_id="+run, nil)
	require.Empty(t, c.until("stream:subscribed"))
	// Journaled but never published, as when a publish fails.
	_, err := runstore.New(b.pool).RecordEvent(b.ctx, run, b.orgA, event.JobProgress, map[string]any{"lost": true})
	require.NoError(t, err)
	b.emit(b.orgA, run, 2)
	require.Equal(t, []int64{1, 2}, []int64{c.next().Seq, c.next().Seq})
}

func TestOnlyTheCallersOrganisation(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	runA, runB := b.run(b.orgA), b.run(b.orgB)
	c := b.dial(b.orgA, true, "scope=org", nil)
	c.until("stream:subscribed")
	b.emit(b.orgB, runB, 1)
	b.emit(b.orgA, runA, 1)
	m := c.next()
	require.Equal(t, runA, m.JobID)
	require.Equal(t, b.orgA, m.OrgID)

	// Another organisation's job answers as a missing one.
	c.send(map[string]any{"type": "subscribe", "job_id": runB})
	m = c.next()
	require.Equal(t, "stream:error", m.Type)
	require.Equal(t, "JOB_NOT_FOUND", m.Code)
}

func TestOrgScopeNeedsTheViewerRole(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	c := b.dial(b.orgA, false, "scope=org", nil)
	m := c.next()
	require.Equal(t, "stream:error", m.Type)
	require.Equal(t, "FORBIDDEN", m.Code)
	c.send(map[string]any{"type": "nonsense"})
	require.Equal(t, "VALIDATION_FAILED", c.next().Code)
}

func TestOnePubSubSubscriptionPerOrganisation(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	channel := event.Channel(b.orgA)
	var cs []*client
	for range 3 {
		c := b.dial(b.orgA, true, "scope=org", nil)
		c.until("stream:subscribed")
		cs = append(cs, c)
	}
	n, err := b.rdb.PubSubNumSub(b.ctx, channel).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n[channel])
	require.Equal(t, int64(3), b.hub.Stats().Clients)

	for _, c := range cs {
		require.NoError(t, c.ws.Close())
	}
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubNumSub(b.ctx, channel).Result()
		return err == nil && n[channel] == 0 && b.hub.Stats().Feeds == 0 && b.hub.Stats().Clients == 0
	}, 10*time.Second, 10*time.Millisecond)
}

func TestChainSubscriptionFollowsEveryStepRun(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	var chain string
	require.NoError(t, b.pool.QueryRow(b.ctx, `INSERT INTO chains (org_id, trace_id, job_type, status, definition)
		VALUES ($1, gen_random_uuid(), 'demo_chain', 'running', '{}') RETURNING id`, b.orgA).Scan(&chain))
	step1, other := b.run(b.orgA), b.run(b.orgA)
	_, err := b.pool.Exec(b.ctx, `UPDATE runs SET chain_id = $1 WHERE id = $2`, chain, step1)
	require.NoError(t, err)
	b.emit(b.orgA, step1, 1)

	c := b.dial(b.orgA, false, "chain_id="+chain, nil)
	replayed := c.until("stream:subscribed")
	require.Len(t, replayed, 1)
	require.Equal(t, step1, replayed[0].JobID)

	// A step run created after the subscription is followed too; a run outside the chain is not.
	step2 := b.run(b.orgA)
	_, err = b.pool.Exec(b.ctx, `UPDATE runs SET chain_id = $1 WHERE id = $2`, chain, step2)
	require.NoError(t, err)
	b.emit(b.orgA, other, 1)
	b.emit(b.orgA, step2, 1)
	m := c.next()
	require.Equal(t, step2, m.JobID)
	require.Equal(t, int64(1), m.Seq)
}

func TestSlowClientIsDroppedWithoutSlowingOthers(t *testing.T) {
	t.Parallel()
	// A long write timeout: the hub's write to the slow client stays blocked (rather than
	// failing) until the client reads again, so the close reason can follow.
	b := setup(t, &stream.Hub{SendBuffer: 4, WriteTimeout: time.Minute})
	run := b.run(b.orgA)
	// The slow client reads nothing until it has been dropped: once the socket buffers
	// (a few MiB on loopback) are full, the hub's writes to it block and its buffer fills.
	slow := b.dial(b.orgA, true, "scope=org", nil)
	slow.until("stream:subscribed")
	fast := b.dial(b.orgA, true, "scope=org", nil)
	fast.until("stream:subscribed")

	big := strings.Repeat("x", 256<<10)
	const n = 80
	received := make(chan int, 1)
	var progress atomic.Int64
	go func() {
		got := 0
		for got < n {
			_ = fast.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			var m msg
			if err := fast.ws.ReadJSON(&m); err != nil {
				break
			}
			if m.Type == event.JobProgress {
				got++
				progress.Store(int64(got))
			}
		}
		received <- got
	}()
	for i := 1; i <= n; i++ {
		// Stay at most two events ahead of the fast client, whatever the machine's load, so
		// only the client that reads nothing can fall behind its buffer of four.
		require.Eventually(t, func() bool { return progress.Load() >= int64(i-3) }, 30*time.Second, time.Millisecond)
		require.NoError(t, b.pub.Publish(b.ctx, event.Envelope{Type: event.JobProgress, JobID: run, OrgID: b.orgA,
			Seq: int64(i), TS: time.Now(), Data: json.RawMessage(`{"pad":"` + big + `"}`)}))
	}
	require.Equal(t, n, <-received, "the fast client receives every event")
	require.Eventually(t, func() bool { return b.hub.Stats().Dropped == 1 }, 10*time.Second, 10*time.Millisecond)

	// The slow client finds the close reason after whatever was already on the wire.
	var closeErr *websocket.CloseError
	for {
		_ = slow.ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, _, err := slow.ws.ReadMessage()
		if err != nil {
			require.ErrorAs(t, err, &closeErr)
			break
		}
	}
	require.Equal(t, stream.CloseSlowConsumer, closeErr.Code)
	require.Equal(t, "slow consumer", closeErr.Text)
}

func TestCloseSaysGoingAway(t *testing.T) {
	t.Parallel()
	b := setup(t, &stream.Hub{})
	c := b.dial(b.orgA, true, "scope=org", nil)
	c.until("stream:subscribed")
	b.hub.Close()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := c.ws.ReadMessage()
	var closeErr *websocket.CloseError
	require.ErrorAs(t, err, &closeErr)
	require.Equal(t, websocket.CloseGoingAway, closeErr.Code)
}
