// Command wsbench measures the dispatcher's WebSocket stream on a running stack:
//
//  1. memory per idle connection: the dispatcher's resident set, Go heap in use and
//     goroutines (read from its /metrics) before and after opening -idle connections that
//     receive nothing;
//
//  2. publish -> client latency (with -redis): -clients on the organisation stream while
//     wsbench publishes -publish events at -rate per second through shared/event.Publisher,
//     the executor's publish path, each stamped with its publish time — one clock at both
//     ends;
//
//  3. end to end with real jobs: -clients connected while -jobs jobs run; for every event,
//     receive time minus the event's journal timestamp (`ts`, taken by Postgres when the
//     executor journals it, before it publishes). With -redis a plain Redis subscriber on
//     the same channel is the baseline.
//
//     make start
//     go run ./bench/cmd/wsbench -key "$(cat .run/admin.key)" -redis redis://127.0.0.1:26379/0
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/bench/internal/stats"
	"github.com/switchyard-ai/switchyard/shared/event"
)

type envelope struct {
	Type  string    `json:"type"`
	JobID string    `json:"job_id"`
	OrgID string    `json:"org_id"`
	Seq   int64     `json:"seq"`
	TS    time.Time `json:"ts"`
}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "dispatcher base URL")
	key := flag.String("key", os.Getenv("SWITCHYARD_API_KEY"), "API key with the viewer and dispatch roles (default $SWITCHYARD_API_KEY)")
	clients := flag.Int("clients", 100, "clients on the organisation stream during the latency phase")
	idle := flag.Int("idle", 1000, "idle connections for the memory phase (0 skips it)")
	jobs := flag.Int("jobs", 100, "jobs dispatched during the latency phase")
	conc := flag.Int("concurrency", 4, "jobs dispatched at once")
	jobType := flag.String("job-type", "demo_llm", "job type to dispatch")
	redisURL := flag.String("redis", "", "Redis URL of the stack: adds a direct Pub/Sub subscriber as the baseline, and the publish phase")
	publish := flag.Int("publish", 2000, "with -redis: events published straight to the organisation channel, as the executor does (0 skips)")
	rate := flag.Int("rate", 200, "events per second in the publish phase")
	flag.Parse()
	if *key == "" {
		fail("-key or SWITCHYARD_API_KEY is required (make run writes it to .run/admin.key)")
	}
	b := &bench{base: strings.TrimRight(*base, "/"), key: *key, http: &http.Client{Timeout: 30 * time.Second}}
	var me struct {
		OrgID string `json:"orgId"`
	}
	if err := b.getJSON("/api/v1/session", &me); err != nil {
		fail("reading the session: " + err.Error())
	}

	if *idle > 0 {
		b.memory(*idle)
	}
	if *redisURL != "" && *publish > 0 {
		b.publishPhase(me.OrgID, *clients, *publish, *rate, *redisURL)
	}
	if *jobs > 0 {
		b.latency(me.OrgID, *clients, *jobs, *conc, *jobType, *redisURL)
	}
}

// publishPhase publishes events with shared/event.Publisher — the executor's own publish
// path — stamping each with the time of publishing, and measures publish -> receive at every
// client. One clock (this process) at both ends, so the figure is exact.
func (b *bench) publishPhase(orgID string, clients, n, rate int, redisURL string) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		fail("-redis: " + err.Error())
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	pub := &event.Publisher{Redis: rdb}
	ws := &sink{}
	var wg sync.WaitGroup
	conns := b.connect(clients, ws, &wg)
	time.Sleep(500 * time.Millisecond)
	job := uuid.NewString()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	start := time.Now()
	for i := 1; i <= n; i++ {
		<-tick.C
		env := event.Envelope{Type: event.JobProgress, JobID: job, OrgID: orgID, Seq: int64(i),
			Data: json.RawMessage(`{"bench":"wsbench"}`), TS: time.Now()}
		if err := pub.Publish(context.Background(), env); err != nil {
			fail("publishing: " + err.Error())
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	time.Sleep(time.Second)
	for _, c := range conns {
		_ = c.Close()
	}
	wg.Wait()
	fmt.Printf("publish phase: %d clients on scope=org, %d events at %d/s (%s; %d deliveries expected)\n",
		clients, n, rate, elapsed.Round(time.Millisecond), clients*n)
	fmt.Printf("  publish -> WebSocket client: %s (received %d)\n", stats.Summarize(ws.samples), ws.events)
}

// connect opens clients on the organisation stream, feeding what they receive to s.
func (b *bench) connect(clients int, s *sink, wg *sync.WaitGroup) []*websocket.Conn {
	conns := make([]*websocket.Conn, 0, clients)
	for range clients {
		c, err := b.dial("scope=org")
		if err != nil {
			fail("connecting clients: " + err.Error())
		}
		conns = append(conns, c)
		wg.Go(func() {
			for {
				_, data, err := c.ReadMessage()
				at := time.Now()
				if err != nil {
					return
				}
				var env envelope
				if json.Unmarshal(data, &env) == nil && !strings.HasPrefix(env.Type, "stream:") {
					s.add(env, at)
				}
			}
		})
	}
	return conns
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "wsbench:", msg)
	os.Exit(1)
}

type bench struct {
	base, key string
	http      *http.Client
}

func (b *bench) getJSON(path string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+b.key)
	res, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

func (b *bench) dial(query string) (*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(b.base, "http") + "/api/v1/stream?" + query
	ws, res, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + b.key}})
	if res != nil {
		res.Body.Close()
	}
	return ws, err
}

// scrape reads a few gauges from the dispatcher's /metrics.
func (b *bench) scrape() map[string]float64 {
	res, err := b.http.Get(b.base + "/metrics")
	if err != nil {
		fail("reading /metrics: " + err.Error())
	}
	defer res.Body.Close()
	want := map[string]bool{"process_resident_memory_bytes": true, "go_memstats_heap_inuse_bytes": true,
		"go_goroutines": true, "switchyard_stream_clients": true}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && want[name] {
			out[name], _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}

func (b *bench) memory(n int) {
	// Settle: let earlier garbage be collected so the before/after heaps compare like with like.
	time.Sleep(2 * time.Second)
	before := b.scrape()
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		ws, err := b.dial("")
		if err != nil {
			fail("opening idle connections: " + err.Error())
		}
		conns = append(conns, ws)
		go func() { // answer pings; otherwise idle
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	after := b.scrape()
	for _, ws := range conns {
		_ = ws.Close()
	}
	per := func(k string) float64 { return (after[k] - before[k]) / float64(n) }
	fmt.Printf("idle connections: %d (switchyard_stream_clients %v -> %v)\n", n,
		before["switchyard_stream_clients"], after["switchyard_stream_clients"])
	fmt.Printf("  per idle connection: RSS %.1f KiB, Go heap in use %.1f KiB, goroutines %.1f\n",
		per("process_resident_memory_bytes")/1024, per("go_memstats_heap_inuse_bytes")/1024, per("go_goroutines"))
}

// sink collects the latency of every event received, from its ts.
type sink struct {
	mu      sync.Mutex
	samples []time.Duration
	events  int
}

func (s *sink) add(env envelope, at time.Time) {
	if env.Seq == 0 || env.TS.IsZero() {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, at.Sub(env.TS))
	s.events++
	s.mu.Unlock()
}

func (b *bench) latency(orgID string, clients, jobs, conc int, jobType, redisURL string) {
	ws := &sink{}
	var wg sync.WaitGroup
	conns := b.connect(clients, ws, &wg)
	base := &sink{}
	var rdb *redis.Client
	if redisURL != "" {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			fail("-redis: " + err.Error())
		}
		rdb = redis.NewClient(opt)
		ps := rdb.Subscribe(context.Background(), "events:org:"+orgID)
		if _, err := ps.Receive(context.Background()); err != nil {
			fail("subscribing to Redis: " + err.Error())
		}
		wg.Go(func() {
			for m := range ps.Channel() {
				at := time.Now()
				var env envelope
				if json.Unmarshal([]byte(m.Payload), &env) == nil {
					base.add(env, at)
				}
			}
		})
		defer ps.Close()
	}
	time.Sleep(500 * time.Millisecond) // every subscription confirmed

	start := time.Now()
	work := make(chan int)
	var dwg sync.WaitGroup
	failures := 0
	var fmu sync.Mutex
	for range conc {
		dwg.Go(func() {
			for range work {
				if err := b.runJob(jobType); err != nil {
					fmu.Lock()
					failures++
					fmu.Unlock()
					fmt.Fprintln(os.Stderr, "wsbench:", err)
				}
			}
		})
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	dwg.Wait()
	time.Sleep(time.Second) // the last events reach every client
	elapsed := time.Since(start)
	for _, c := range conns {
		_ = c.Close()
	}
	if rdb != nil {
		_ = rdb.Close()
	}
	wg.Wait()

	wsS := stats.Summarize(ws.samples)
	fmt.Printf("latency phase: %d clients on scope=org, %d %s jobs (%d at once, %d failed) in %s\n",
		clients, jobs, jobType, conc, failures, elapsed.Round(time.Millisecond))
	fmt.Printf("  events received by WebSocket clients: %d (%.0f per client)\n", ws.events, float64(ws.events)/float64(clients))
	fmt.Printf("  journal ts -> WebSocket client:  %s\n", wsS)
	if rdb != nil {
		bS := stats.Summarize(base.samples)
		fmt.Printf("  journal ts -> Redis subscriber:  %s  (baseline)\n", bS)
		if bS.P50 > 0 && bS.P99 > 0 {
			fmt.Printf("  journal-ts latency, WebSocket / baseline: p50 x%.2f, p99 x%.2f\n",
				float64(wsS.P50)/float64(bS.P50), float64(wsS.P99)/float64(bS.P99))
		}
	}
}

// runJob dispatches one job and waits for it to finish.
func (b *bench) runJob(jobType string) error {
	body := fmt.Sprintf(`{"job_type":%q,"payload":{"prompt":"wsbench"}}`, jobType)
	req, _ := http.NewRequest(http.MethodPost, b.base+"/api/v1/dispatch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := b.http.Do(req)
	if err != nil {
		return err
	}
	var acc struct {
		JobID string `json:"jobId"`
	}
	err = json.NewDecoder(res.Body).Decode(&acc)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		return fmt.Errorf("dispatch: %s %v", res.Status, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var r struct {
			Status string `json:"status"`
		}
		if err := b.getJSON("/api/v1/dispatch/"+acc.JobID, &r); err != nil {
			return err
		}
		switch r.Status {
		case "completed", "failed", "cancelled", "timed_out", "rejected":
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("job %s did not finish", acc.JobID)
}
