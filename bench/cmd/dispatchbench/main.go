// Command dispatchbench drives a running dispatcher at fixed request rates (open loop) and
// reports dispatch latency p50/p99/p99.9 per rate and the highest sustained rate, beside a
// floor measured in the same run: one Postgres insert of a run row plus one asynq enqueue,
// with no HTTP, no authentication and no governance — the least any dispatch must cost.
//
// It dispatches a no-op skill to its own queue ("bench", no consumers), so executors do not
// compete for the CPU, and lifts the dev organisation's rate limits for the run (restored
// afterwards). The runs and tasks it creates are deleted after each rate. Beside latency it
// prints the whole machine's CPU time per operation (every process, this generator too) and
// the steal during each load, so runs on a noisy host can still be compared.
//
// With -batch N it then measures batch dispatch for -rounds rounds, each round three closed
// loops of -duration, one after the other so that each round meets the host in about the
// same state: the floor and single dispatches from -workers goroutines each, then batches
// of N items (POST /api/v1/dispatch/batch) from -batch-senders goroutines. It reports items
// per second and per-batch latency beside the floor's and single dispatch's operations per
// second, and the machine's CPU per item beside the CPU per floor operation. On a host
// shared with other work the machine's CPU counts theirs too: -stack-pids names the
// processes of the stack (the dispatcher, Postgres's postmaster, Redis; children included),
// whose CPU per item is then reported as well. -rates "" skips the fixed-rate runs.
//
//	make start
//	go run ./bench/cmd/dispatchbench -key "$(cat .run/admin.key)" \
//	  -db "postgres://postgres@127.0.0.1:25432/switchyard" -redis redis://127.0.0.1:26379/0
//	go run ./bench/cmd/dispatchbench -key "$(cat .run/admin.key)" -rates "" -batch 500 -rounds 3 \
//	  -stack-pids "$(cat .run/pids/dispatcher.pid),$(pgrep -f 'postgres -D .*-p 25432'),$(pgrep -f 'redis-server .*:26379')"
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/load"
	"github.com/switchyard-ai/switchyard/shared/ids"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "dispatcher base URL")
	key := flag.String("key", os.Getenv("SWITCHYARD_API_KEY"), "admin API key (make run writes .run/admin.key)")
	dbURL := flag.String("db", "postgres://postgres@127.0.0.1:25432/switchyard?sslmode=disable", "Postgres URL, for the floor")
	redisURL := flag.String("redis", "redis://127.0.0.1:26379/0", "Redis URL, for the floor and clean-up")
	ratesFlag := flag.String("rates", "500,1000,2000,3000,4000", "request rates to run, per second")
	dur := flag.Duration("duration", 10*time.Second, "duration of each rate")
	maxP99 := flag.Duration("sustained-p99", 50*time.Millisecond, "p99 under which a rate counts as sustained")
	inflight := flag.Int("max-inflight", 512, "most requests in flight at once")
	batchSize := flag.Int("batch", 0, "items per batch for the batch runs; 0 skips them")
	senders := flag.Int("batch-senders", 2, "batches in flight at once in the batch runs")
	workers := flag.Int("workers", 64, "goroutines of the closed-loop floor and single-dispatch runs beside the batches")
	rounds := flag.Int("rounds", 3, "rounds of the batch runs (floor, single, batch in each)")
	stackFlag := flag.String("stack-pids", "", "comma-separated pids of the stack's processes (their children included), "+
		"whose CPU per item the batch runs report")
	flag.Parse()
	if *key == "" {
		fail("-key is required")
	}
	var rates []float64
	for _, r := range strings.Split(*ratesFlag, ",") {
		if strings.TrimSpace(r) == "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			fail("bad -rates")
		}
		rates = append(rates, v)
	}
	for _, p := range strings.Split(*stackFlag, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			fail("bad -stack-pids")
		}
		stackPIDs = append(stackPIDs, pid)
	}
	ctx := context.Background()
	api := &client{base: strings.TrimRight(*url, "/"), key: *key, http: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: *inflight, MaxConnsPerHost: *inflight}, Timeout: 30 * time.Second}}

	orgID, restore := prepare(api)
	defer restore()

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		fail("db: " + err.Error())
	}
	defer pool.Close()
	opt, err := asynq.ParseRedisURI(*redisURL)
	if err != nil {
		fail("redis: " + err.Error())
	}
	aq := asynq.NewClient(opt)
	defer aq.Close()
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	defer cleanup(insp, pool)

	// The floor's runs have the shape the dispatcher writes: a reference to a skill snapshot
	// stored once, not a copy of it. They name the queue their tasks are on, so that the
	// dispatcher's reconciler, finding the task, leaves them alone while they wait for the
	// clean-up.
	digest, err := floorSnapshot(ctx, pool, orgID)
	if err != nil {
		fail("db: " + err.Error())
	}
	floor := func(ctx context.Context) error {
		id := ids.New() // as the dispatcher makes them
		if _, err := pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version,
			skill_snapshot_digest, execution_type, queue, status, payload) VALUES ($1, $2, $3, 'bench_floor', 1, $4,
			'llm_only', 'benchfloor', 'queued', '{"prompt":"x"}')`, id, orgID, ids.New(), digest); err != nil {
			return err
		}
		_, err := aq.EnqueueContext(ctx, asynq.NewTask("run:execute", []byte(`{}`), asynq.TaskID(id), asynq.Queue("benchfloor:normal")))
		return err
	}
	body := []byte(`{"job_type":"bench_noop","user_id":"bench","payload":{"prompt":"hello"}}`)
	dispatch := func(ctx context.Context) error {
		code, _, err := api.do(ctx, http.MethodPost, "/api/v1/dispatch", body)
		if err == nil && code != http.StatusAccepted {
			err = fmt.Errorf("status %d", code)
		}
		return err
	}

	// Warm up connections and caches.
	load.Run(ctx, 200, 2*time.Second, *inflight, floor)
	load.Run(ctx, 200, 2*time.Second, *inflight, dispatch)
	if len(rates) > 0 {
		runRates(ctx, pool, insp, rates, *dur, *inflight, *maxP99, floor, dispatch)
	}
	if *batchSize > 0 {
		runBatches(ctx, api, pool, insp, orgID, *batchSize, *senders, *workers, *rounds, *dur, floor, dispatch)
	}
}

// runRates drives the floor and single dispatch at each fixed rate, open loop.
func runRates(ctx context.Context, pool *pgxpool.Pool, insp *asynq.Inspector, rates []float64, dur time.Duration,
	inflight int, maxP99 time.Duration, floor, dispatch func(context.Context) error) {
	fmt.Printf("%-9s %-8s %9s %9s %9s %9s %9s %7s %10s %6s %8s %9s\n", "op", "rate/s", "achieved", "p50", "p99", "p99.9", "max",
		"errors", "cpu/op", "steal", "wal/op", "stack/op")
	best := 0.0
	for _, rate := range rates {
		f, fcpu := measured(pool, func() load.Result { return load.Run(ctx, rate, dur, inflight, floor) })
		d, dcpu := measured(pool, func() load.Result { return load.Run(ctx, rate, dur, inflight, dispatch) })
		print("floor", f, fcpu)
		print("dispatch", d, dcpu)
		fmt.Printf("%-9s %-8.0f ratio dispatch/floor: p50 %.2fx  p99 %.2fx  machine CPU per op %.2fx\n", "", rate,
			ratio(d.Latency.P50, f.Latency.P50), ratio(d.Latency.P99, f.Latency.P99), perOp(dcpu, d)/perOp(fcpu, f))
		if d.Sustained(maxP99) {
			best = rate
		}
		cleanup(insp, pool)
	}
	fmt.Printf("highest sustained dispatch rate (all ok, ≥98%% of target, p99 ≤ %s): %.0f/s\n", maxP99, best)
}

// runBatches measures batch dispatch beside the floor and single dispatch, closed loop,
// rounds times. A batch counts as an error unless every item was accepted (202).
func runBatches(ctx context.Context, api *client, pool *pgxpool.Pool, insp *asynq.Inspector, orgID string,
	size, senders, workers, rounds int, dur time.Duration, floor, dispatch func(context.Context) error) {
	since := time.Now()
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i := range size {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"job_type":"bench_noop","user_id":"bench","payload":{"prompt":"hello %d"}}`, i)
	}
	body.WriteString(`]}`)
	batch := func(ctx context.Context) error {
		code, raw, err := api.do(ctx, http.MethodPost, "/api/v1/dispatch/batch", body.Bytes())
		if err != nil {
			return err
		}
		var res struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || code != http.StatusMultiStatus || res.Accepted != size {
			return fmt.Errorf("status %d, %d of %d accepted", code, res.Accepted, size)
		}
		return nil
	}
	load.Closed(ctx, senders, 2*time.Second, batch) // warm up
	cleanupBatches(insp, pool, orgID, since)

	fmt.Printf("\nclosed loop, %s each: floor and single dispatch from %d goroutines, batches of %d from %d\n",
		dur, workers, size, senders)
	fmt.Printf("%-6s %-9s %10s %9s %9s %9s %7s %10s %6s %6s %11s\n", "round", "op", "per s", "p50", "p99", "max", "errors",
		"cpu/item", "busy", "steal", "stack/item")
	row := func(round int, name string, r load.Result, u usage, items int) float64 {
		ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
		n := max(float64(r.Latency.N*items), 1)
		perItem := u.cpu.BusySeconds * 1000 / n
		fmt.Printf("%-6d %-9s %10.0f %9s %9s %9s %7d %8.3fms %5.1f%% %5.1f%% %9.3fms\n", round, name,
			float64(r.Latency.N*items)/r.Elapsed.Seconds(), ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max),
			r.Errors, perItem, u.cpu.Busy*100, u.cpu.Steal*100, float64(u.stack.Microseconds())/1000/n)
		return perItem
	}
	for round := 1; round <= rounds; round++ {
		f, fu := measured(pool, func() load.Result { return load.Closed(ctx, workers, dur, floor) })
		cleanupBatches(insp, pool, orgID, since)
		d, du := measured(pool, func() load.Result { return load.Closed(ctx, workers, dur, dispatch) })
		cleanupBatches(insp, pool, orgID, since)
		b, bu := measured(pool, func() load.Result { return load.Closed(ctx, senders, dur, batch) })
		cleanupBatches(insp, pool, orgID, since)
		fcpu := row(round, "floor", f, fu, 1)
		dcpu := row(round, "single", d, du, 1)
		bcpu := row(round, "batch", b, bu, size)
		fps := float64(f.Latency.N) / f.Elapsed.Seconds()
		dps := float64(d.Latency.N) / d.Elapsed.Seconds()
		bps := float64(b.Latency.N*size) / b.Elapsed.Seconds()
		fmt.Printf("%-6d ratio batch items/s: %.2fx the floor's ops/s, %.2fx single dispatch's; CPU per item %.2fx the floor's, %.2fx single's\n",
			round, bps/fps, bps/dps, bcpu/fcpu, bcpu/dcpu)
	}
}

// cleanupBatches is cleanup plus the batches the bench created (since it started).
func cleanupBatches(insp *asynq.Inspector, pool *pgxpool.Pool, orgID string, since time.Time) {
	cleanup(insp, pool)
	_, _ = pool.Exec(context.Background(), `DELETE FROM batches WHERE org_id = $1 AND created_at >= $2`, orgID, since)
}

// usage is what one load cost: the whole machine's CPU (every process: the stack, Postgres,
// Redis and this load generator), which steal from neighbours does not inflate the way it
// inflates latency, the CPU of the stack's own processes (-stack-pids), which other tenants
// of the host do not inflate either, and the write-ahead log Postgres wrote (every write
// the machine's disk must take, full-page images included).
type usage struct {
	cpu      hostcpu.Usage
	stack    time.Duration
	walBytes int64
}

// stackPIDs are the processes whose CPU is the stack's (-stack-pids).
var stackPIDs []int

func measured(pool *pgxpool.Pool, run func() load.Result) (load.Result, usage) {
	wal := func() int64 {
		var n int64
		_ = pool.QueryRow(context.Background(), `SELECT wal_bytes::bigint FROM pg_stat_wal`).Scan(&n)
		return n
	}
	c0, err0 := hostcpu.Read()
	s0, _ := hostcpu.Processes(stackPIDs...)
	w0 := wal()
	r := run()
	c1, err1 := hostcpu.Read()
	s1, _ := hostcpu.Processes(stackPIDs...)
	u := usage{walBytes: wal() - w0, stack: s1 - s0}
	if err0 == nil && err1 == nil {
		u.cpu = c1.Since(c0)
	}
	return r, u
}

// perOp is milliseconds of machine CPU per completed operation.
func perOp(u usage, r load.Result) float64 { return u.cpu.BusySeconds * 1000 / ops(r) }

func ops(r load.Result) float64 { return max(r.Achieved*r.Elapsed.Seconds(), 1) }

func print(name string, r load.Result, u usage) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
	fmt.Printf("%-9s %-8.0f %9.0f %9s %9s %9s %9s %7d %8.2fms %5.1f%% %6.1fKB %7.3fms\n", name, r.Rate, r.Achieved,
		ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999), ms(r.Latency.Max), r.Errors, perOp(u, r),
		u.cpu.Steal*100, float64(u.walBytes)/1024/ops(r), float64(u.stack.Microseconds())/1000/ops(r))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// prepare registers the bench queue and skill and lifts the rate limits and the backlog cap
// (the bench's runs are never consumed); it returns the organisation id and a function
// restoring them.
func prepare(api *client) (string, func()) {
	ctx := context.Background()
	mustOK(api.do(ctx, http.MethodPut, "/api/v1/admin/queues/bench",
		[]byte(`{"class":"gpu","concurrency":1,"timeoutSeconds":60,"description":"dispatchbench: a gpu-class queue, so no CPU executor consumes it"}`)))
	mustOK(api.do(ctx, http.MethodPut, "/api/v1/skills/bench_noop",
		[]byte(`{"job_type":"bench_noop","execution_type":"llm_only","queue":"bench","risk_level":"minimal"}`)))
	_, raw, err := api.do(ctx, http.MethodGet, "/api/v1/admin/org", nil)
	if err != nil {
		fail(err.Error())
	}
	var org struct {
		ID         string `json:"id"`
		OrgRPM     int    `json:"orgRpm"`
		UserRPM    int    `json:"userRpm"`
		MaxBacklog int    `json:"maxBacklog"`
	}
	_ = json.Unmarshal(raw, &org)
	mustOK(api.do(ctx, http.MethodPatch, "/api/v1/admin/org", []byte(`{"orgRpm":0,"userRpm":0,"maxBacklog":0}`)))
	return org.ID, func() {
		mustOK(api.do(ctx, http.MethodPatch, "/api/v1/admin/org",
			[]byte(fmt.Sprintf(`{"orgRpm":%d,"userRpm":%d,"maxBacklog":%d}`, org.OrgRPM, org.UserRPM, org.MaxBacklog))))
	}
}

// floorSnapshot stores the skill snapshot the floor's runs reference and returns its digest,
// computed as the dispatcher computes it (SHA-256 over the organisation's id, a zero byte and
// the snapshot's JSON).
func floorSnapshot(ctx context.Context, pool *pgxpool.Pool, orgID string) ([]byte, error) {
	snapshot := []byte(`{"job_type":"bench_floor","version":1,"execution_type":"llm_only","queue":"bench"}`)
	h := sha256.New()
	h.Write([]byte(orgID))
	h.Write([]byte{0})
	h.Write(snapshot)
	digest := h.Sum(nil)
	_, err := pool.Exec(ctx, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO NOTHING`, digest, orgID, snapshot)
	return digest, err
}

// cleanup removes what a rate left behind: its tasks and its runs (which no executor will
// ever take, and which the dispatcher's reconciler would otherwise keep re-enqueueing).
func cleanup(insp *asynq.Inspector, pool *pgxpool.Pool) {
	_, _ = pool.Exec(context.Background(), `DELETE FROM runs WHERE job_type IN ('bench_noop', 'bench_floor')`)
	for _, q := range []string{"benchfloor:normal", "bench:normal"} {
		_ = insp.DeleteQueue(q, true)
	}
}

func mustOK(code int, body []byte, err error) {
	if err != nil || code >= 300 {
		fail(fmt.Sprintf("setup request failed: %d %s %v", code, body, err))
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "dispatchbench:", msg)
	os.Exit(1)
}

type client struct {
	base, key string
	http      *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}
