// Command executorbench measures one executor process on a running stack (Postgres, Redis,
// sim-llm, provider-router, executor), bypassing the dispatcher so that only the executor's
// costs are measured: it writes runs the way the dispatcher does and enqueues their tasks.
//
//	transit   enqueue -> handler start (runs.started_at, stamped at the handler's entry),
//	          idle and under load, p50/p99; under load also split at the return of the
//	          bench's Enqueue call, beside a floor: one Redis PING from this process every
//	          10 ms during the window
//	overhead  handler wall time (started_at -> finished_at) minus the router call (the
//	          llm_call span's latency_ms), per Tier 1 job
//	load      a closed loop holding -inflight jobs in flight on a queue of that concurrency
//	          for -duration after -warmup, against a model with the lab latency; throughput
//	          per window against the theoretical rate in-flight / mean router-call latency,
//	          and the executor's resident memory per in-flight job (from its /metrics)
//
// The load phase reports the ratio to the theoretical rate two ways. By Little's law the
// achieved rate is (mean number of router calls in progress) / (mean router-call latency),
// so achieved / theoretical equals the share of the -inflight slots' time spent inside a
// router call: "occupancy", summed from the llm_call spans' intervals clipped to the
// window. It is exact whatever the mix of calls in progress. The plain ratio (completions
// per second × mean latency of the calls that completed in the window / in-flight) agrees
// with it only in steady state: with latencies up to 40 s a window that starts soon after
// the first wave holds too few long calls at its start and too many at its end, which
// biases that ratio low by several percent; hence the -warmup.
//
// It registers, for the organisation -org: the queue "bench" (cpu, concurrency -inflight),
// the skills bench_fast (routing hint fast, queue default) and bench_lab (routing hint
// reasoning, queue bench). Start sim-llm with sim-fast at zero latency and sim-large at the
// lab latency (see docs/PERFORMANCE.md for the exact commands).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/stats"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
)

type bench struct {
	pool    *pgxpool.Pool
	rdb     *redis.Client
	client  *queue.Client
	orgID   string
	metrics string
	// snapshot is the digest of the skill snapshot the bench's runs reference (setup stores it).
	snapshot [32]byte

	mu       sync.Mutex
	waiters  map[string]chan struct{}
	enqueued sync.Map // probe run id → when its Enqueue call returned
	onDone   func(id string)
}

func main() {
	dbURL := flag.String("db", os.Getenv("SWITCHYARD_DATABASE_URL"), "Postgres URL (default $SWITCHYARD_DATABASE_URL)")
	redisURL := flag.String("redis", os.Getenv("SWITCHYARD_REDIS_URL"), "Redis URL (default $SWITCHYARD_REDIS_URL)")
	org := flag.String("org", "dev", "organisation slug")
	metrics := flag.String("metrics", "http://127.0.0.1:8081/metrics", "the executor's /metrics")
	idleN := flag.Int("idle", 300, "transit/overhead jobs run one at a time (phase 1)")
	inflight := flag.Int("inflight", 1000, "jobs held in flight in the load phase (0 skips it)")
	duration := flag.Duration("duration", 60*time.Second, "length of the load phase after the warm-up")
	warmup := flag.Duration("warmup", 60*time.Second, "load before measuring: longer than the longest call, so the mix in flight settles")
	window := flag.Duration("window", 10*time.Second, "throughput window")
	flag.Parse()
	if *dbURL == "" || *redisURL == "" {
		fmt.Fprintln(os.Stderr, "executorbench: -db and -redis (or SWITCHYARD_DATABASE_URL, SWITCHYARD_REDIS_URL) are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runBench(ctx, *dbURL, *redisURL, *org, *metrics, *idleN, *inflight, *warmup, *duration, *window); err != nil {
		fmt.Fprintln(os.Stderr, "executorbench:", err)
		os.Exit(1)
	}
}

func runBench(ctx context.Context, dbURL, redisURL, org, metrics string, idleN, inflight int, warmup, duration, window time.Duration) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := redisconn.Connect(ctx, redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	opt, err := redisconn.Asynq(redisURL)
	if err != nil {
		return err
	}
	// Enqueue as the dispatcher does: a queue client on a connection of its own.
	client := queue.NewClient(opt)
	defer client.Close()
	b := &bench{pool: pool, rdb: rdb, client: client, metrics: metrics,
		waiters: map[string]chan struct{}{}}
	if err := pool.QueryRow(ctx, `SELECT id FROM orgs WHERE slug = $1`, org).Scan(&b.orgID); err != nil {
		return fmt.Errorf("organisation %q: %w", org, err)
	}
	if err := b.setup(ctx, max(inflight, 1)); err != nil {
		return err
	}
	go b.listen(ctx)
	time.Sleep(500 * time.Millisecond) // let the subscription and the queue server start

	// Phase 1: idle transit and overhead.
	var ids []string
	enq := map[string]time.Time{}
	for i := 0; i < idleN+20 && ctx.Err() == nil; i++ {
		id, t0, err := b.submit(ctx, "bench_fast", "default", true)
		if err != nil {
			return err
		}
		if i >= 20 { // warm-up
			ids = append(ids, id)
			enq[id] = t0
		}
		// Pause between jobs so each finds an idle, polling worker.
		time.Sleep(20 * time.Millisecond)
	}
	transit, overhead, _, err := b.measure(ctx, ids, enq)
	if err != nil {
		return err
	}
	fmt.Printf("idle   transit enqueue->handler start: %s\n", stats.Summarize(transit))
	fmt.Printf("idle   executor overhead (wall - router call): %s\n", stats.Summarize(overhead))
	if inflight == 0 {
		return nil
	}

	// Phase 2: closed loop with `inflight` jobs on the bench queue, transit probes on default.
	rssIdle := b.rss()
	var completed atomic.Int64
	var stopping atomic.Bool
	var loadIDs sync.Map
	b.onDone = func(id string) {
		if _, ok := loadIDs.Load(id); !ok {
			return
		}
		completed.Add(1)
		if stopping.Load() {
			return
		}
		go func() {
			nid, _, err := b.submit(context.WithoutCancel(ctx), "bench_lab", "bench", false)
			if err == nil {
				loadIDs.Store(nid, true)
			}
		}()
	}
	start := time.Now()
	for range inflight {
		id, _, err := b.submit(ctx, "bench_lab", "bench", false)
		if err != nil {
			return err
		}
		loadIDs.Store(id, true)
	}
	fmt.Printf("load   %d jobs enqueued in %s\n", inflight, time.Since(start).Round(time.Millisecond))
	// Warm-up: the first wave holds only short calls; measure once the mix has settled.
	probeCtx, stopProbes := context.WithCancel(ctx)
	var probeIDs []string
	probeEnq := map[string]time.Time{}
	var probeMu sync.Mutex
	var probes sync.WaitGroup
	probes.Go(func() {
		for probeCtx.Err() == nil {
			id, t0, err := b.submit(probeCtx, "bench_fast", "default", true)
			if err == nil {
				probeMu.Lock()
				probeIDs = append(probeIDs, id)
				probeEnq[id] = t0
				probeMu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	time.Sleep(warmup)
	// A floor beside the probes: one Redis round trip (PING) from this process every 10 ms
	// during the window — the least any enqueue → handler start can take, several times over.
	pingCtx, stopPings := context.WithCancel(ctx)
	var pings []time.Duration
	var pinging sync.WaitGroup
	pinging.Go(func() {
		for pingCtx.Err() == nil {
			t := time.Now()
			if b.rdb.Ping(pingCtx).Err() == nil {
				pings = append(pings, time.Since(t))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	var rssLoad []float64
	base := completed.Load()
	cpu0, cpuErr := hostcpu.Read()
	execCPU0 := b.metric("process_cpu_seconds_total")
	t0 := time.Now()
	var rates []float64
	for time.Since(t0) < duration && ctx.Err() == nil {
		w0 := completed.Load()
		time.Sleep(window)
		rate := float64(completed.Load()-w0) / window.Seconds()
		rates = append(rates, rate)
		rssLoad = append(rssLoad, b.rss())
		fmt.Printf("load   window %d: %.1f jobs/s, executor rss %.0f MiB, in flight %d\n", len(rates), rate,
			rssLoad[len(rssLoad)-1]/(1<<20), b.inFlight(ctx))
	}
	t1 := time.Now()
	elapsed := t1.Sub(t0)
	total := completed.Load() - base
	cpu1, err := hostcpu.Read()
	if cpuErr == nil && err == nil && total > 0 {
		u := cpu1.Since(cpu0)
		fmt.Printf("cpu    machine busy %.0f%% of its cores, steal %.1f%%: %.2f ms of CPU per job on the whole machine (every process, this bench too), %.2f ms in the executor\n",
			u.Busy*100, u.Steal*100, u.BusySeconds*1000/float64(total),
			(b.metric("process_cpu_seconds_total")-execCPU0)*1000/float64(total))
	}
	stopPings()
	pinging.Wait()
	stopProbes()
	probes.Wait()
	stopping.Store(true)

	probeMu.Lock()
	ptransit, _, _, err := b.measure(ctx, probeIDs, probeEnq)
	// The same transit split where this bench's Enqueue call returned: the call's own
	// share (a round trip from a process on the same busy cores) and the executor's.
	var enqCall []time.Duration
	probeReturned := map[string]time.Time{}
	for _, id := range probeIDs {
		if t, ok := b.enqueued.Load(id); ok {
			probeReturned[id] = t.(time.Time)
			enqCall = append(enqCall, t.(time.Time).Sub(probeEnq[id]))
		}
	}
	var pAfter []time.Duration
	if err == nil {
		pAfter, _, _, err = b.measure(ctx, probeIDs, probeReturned)
	}
	probeMu.Unlock()
	if err != nil {
		return err
	}
	// The theoretical rate uses the mean router-call latency of the load jobs measured.
	var meanLLM float64
	if err := pool.QueryRow(ctx, `SELECT avg((s.attributes->>'latency_ms')::float8) FROM spans s JOIN runs r ON r.id = s.run_id
		WHERE r.job_type = 'bench_lab' AND s.type = 'llm_call' AND s.ended_at > $1`, t0).Scan(&meanLLM); err != nil {
		return err
	}
	// Seconds spent inside router calls within [t0, t1]: a finished call spans
	// [ended_at - latency_ms, ended_at]; one still in progress at t1 started at started_at.
	var busy float64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(GREATEST(0, extract(epoch FROM
			LEAST(COALESCE(s.ended_at, $2), $2) -
			GREATEST(COALESCE(s.ended_at - make_interval(secs => (s.attributes->>'latency_ms')::float8 / 1000), s.started_at), $1)))), 0)
		FROM spans s JOIN runs r ON r.id = s.run_id
		WHERE r.job_type = 'bench_lab' AND s.type = 'llm_call' AND s.started_at < $2
			AND (s.ended_at IS NULL OR s.ended_at > $1)`, t0, t1).Scan(&busy); err != nil {
		return err
	}
	// The load jobs' own transit: queued_at (the run's insert, just before its enqueue) ->
	// started_at, for the jobs queued in the window.
	var lt [4]float64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(avg(d), 0), COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY d), 0),
			COALESCE(percentile_cont(0.9) WITHIN GROUP (ORDER BY d), 0), COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY d), 0)
		FROM (SELECT extract(epoch FROM started_at - queued_at) * 1000 AS d FROM runs
			WHERE job_type = 'bench_lab' AND queued_at BETWEEN $1 AND $2 AND started_at IS NOT NULL) t`, t0, t1).
		Scan(&lt[0], &lt[1], &lt[2], &lt[3]); err != nil {
		return err
	}
	rate := float64(total) / elapsed.Seconds()
	theory := float64(inflight) / (meanLLM / 1000)
	fmt.Printf("loaded transit of the load jobs (bench queue, insert -> started_at): mean %.1fms p50 %.1fms p90 %.1fms p99 %.1fms\n",
		lt[0], lt[1], lt[2], lt[3])
	fmt.Printf("loaded transit enqueue->handler start (default queue, during load): %s\n", stats.Summarize(ptransit))
	fmt.Printf("loaded   of which the Enqueue call: %s\n", stats.Summarize(enqCall))
	fmt.Printf("loaded   of which Enqueue returned->handler start: %s\n", stats.Summarize(pAfter))
	fmt.Printf("loaded floor: one Redis round trip (PING) from this bench: %s\n", stats.Summarize(pings))
	fmt.Printf("load   %d completed in %s: %.1f jobs/s; mean router call %.0f ms; theoretical %d/%.3fs = %.1f jobs/s; ratio %.1f%%\n",
		total, elapsed.Round(time.Second), rate, meanLLM, inflight, meanLLM/1000, theory, 100*rate/theory)
	fmt.Printf("load   occupancy (time inside router calls / in-flight slots × window) %.1f%%: %.0f of %.0f slot-seconds\n",
		100*busy/(float64(inflight)*elapsed.Seconds()), busy, float64(inflight)*elapsed.Seconds())
	lo, hi := math.Inf(1), 0.0
	for _, r := range rates {
		lo, hi = math.Min(lo, r), math.Max(hi, r)
	}
	fmt.Printf("load   windows min %.1f max %.1f jobs/s (spread %.1f%% of the mean)\n", lo, hi, 100*(hi-lo)/rate)
	if len(rssLoad) > 0 && rssIdle > 0 {
		peak := 0.0
		for _, r := range rssLoad {
			peak = math.Max(peak, r)
		}
		fmt.Printf("memory executor rss idle %.0f MiB, under load peak %.0f MiB: %.0f KiB per in-flight job\n",
			rssIdle/(1<<20), peak/(1<<20), (peak-rssIdle)/float64(inflight)/1024)
	}
	return nil
}

// setup registers the bench queue and skills, and the skill snapshot its runs reference.
func (b *bench) setup(ctx context.Context, inflight int) error {
	// Keyed as the dispatcher keys snapshots: SHA-256 over the organisation's id, a zero
	// byte and the snapshot's JSON.
	b.snapshot = sha256.Sum256([]byte(b.orgID + "\x00{}"))
	if _, err := b.pool.Exec(ctx, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, '{}')
		ON CONFLICT (digest) DO NOTHING`, b.snapshot[:], b.orgID); err != nil {
		return fmt.Errorf("storing the bench's skill snapshot: %w", err)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO queues (name, class, concurrency, timeout_seconds, description)
		VALUES ('bench', 'cpu', $1, 600, 'executorbench load queue')
		ON CONFLICT (name) DO UPDATE SET concurrency = EXCLUDED.concurrency`, inflight); err != nil {
		return fmt.Errorf("registering queue bench: %w", err)
	}
	for _, s := range [][3]string{{"bench_fast", "fast", "default"}, {"bench_lab", "reasoning", "bench"}} {
		if _, err := b.pool.Exec(ctx, `INSERT INTO skills (org_id, job_type, execution_type, routing_hint, queue,
				max_tokens, timeout_seconds, max_retries, system_prompt)
			VALUES ($1, $2, 'llm_only', $3, $4, 32, 600, 3, 'Be brief.')
			ON CONFLICT (org_id, job_type) DO UPDATE SET routing_hint = EXCLUDED.routing_hint, queue = EXCLUDED.queue,
				enabled = true`, b.orgID, s[0], s[1], s[2]); err != nil {
			return fmt.Errorf("registering skill %s: %w", s[0], err)
		}
	}
	return nil
}

// submit writes a queued run the way the dispatcher does and enqueues its task.
func (b *bench) submit(ctx context.Context, jobType, q string, wait bool) (string, time.Time, error) {
	id := uuid.NewString()
	var done chan struct{}
	if wait {
		done = make(chan struct{})
		b.mu.Lock()
		b.waiters[id] = done
		b.mu.Unlock()
	}
	// The run and its first event, through the run store, in one round trip.
	var rb runstore.RunBatch
	rb.Add(runstore.NewRun{ID: id, OrgID: b.orgID, TraceID: uuid.NewString(), JobType: jobType, SkillVersion: 1,
		SkillSnapshotDigest: b.snapshot, ExecutionType: "llm_only", Queue: q, Priority: string(run.PriorityNormal),
		Status: string(run.Queued), Payload: []byte(`{"prompt":"Hello there, how are you?"}`)})
	var firsts runstore.Firsts
	if _, err := firsts.Add(id, b.orgID, event.JobQueued, map[string]any{"job_type": jobType, "queue": q}); err != nil {
		return "", time.Time{}, err
	}
	batch := &pgx.Batch{}
	rb.Queue(batch)
	firsts.Queue(batch)
	if err := runstore.New(b.pool).SendBatch(ctx, batch); err != nil {
		return "", time.Time{}, fmt.Errorf("writing run: %w", err)
	}
	task, err := queue.NewRunTask(queue.Enqueue{RunID: id, OrgID: b.orgID, Queue: q, Priority: run.PriorityNormal,
		Timeout: 10 * time.Minute, MaxRetry: 3})
	if err != nil {
		return "", time.Time{}, err
	}
	t0 := time.Now()
	if _, err := b.client.EnqueueContext(ctx, task); err != nil {
		return "", time.Time{}, fmt.Errorf("enqueueing: %w", err)
	}
	if wait {
		b.enqueued.Store(id, time.Now())
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			return id, t0, fmt.Errorf("run %s did not finish within 60s", id)
		case <-ctx.Done():
			return id, t0, ctx.Err()
		}
	}
	return id, t0, nil
}

// listen follows the organisation's events and signals finished runs.
func (b *bench) listen(ctx context.Context) {
	sub := b.rdb.Subscribe(ctx, event.Channel(b.orgID))
	defer sub.Close()
	for msg := range sub.Channel(redis.WithChannelSize(100000)) {
		if !strings.Contains(msg.Payload, `"job:completed"`) && !strings.Contains(msg.Payload, `"job:failed"`) {
			continue
		}
		var env struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal([]byte(msg.Payload), &env) != nil {
			continue
		}
		b.mu.Lock()
		ch := b.waiters[env.JobID]
		delete(b.waiters, env.JobID)
		f := b.onDone
		b.mu.Unlock()
		if ch != nil {
			close(ch)
		}
		if f != nil {
			f(env.JobID)
		}
	}
}

// measure reads transit (enqueue -> started_at), overhead (wall - router call) and wall.
func (b *bench) measure(ctx context.Context, ids []string, enq map[string]time.Time) (transit, overhead, wall []time.Duration, err error) {
	rows, err := b.pool.Query(ctx, `SELECT r.id::text, r.started_at, r.finished_at, r.status,
			COALESCE((SELECT (s.attributes->>'latency_ms')::float8 FROM spans s WHERE s.run_id = r.id AND s.type = 'llm_call' LIMIT 1), -1)
		FROM runs r WHERE r.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var started, finished *time.Time
		var llmMS float64
		if err := rows.Scan(&id, &started, &finished, &status, &llmMS); err != nil {
			return nil, nil, nil, err
		}
		if started == nil || finished == nil || status != "completed" || llmMS < 0 {
			continue
		}
		transit = append(transit, started.Sub(enq[id]))
		w := finished.Sub(*started)
		wall = append(wall, w)
		overhead = append(overhead, w-time.Duration(llmMS*float64(time.Millisecond)))
	}
	return transit, overhead, wall, rows.Err()
}

// rss reads the executor's resident memory from its /metrics; 0 if unavailable.
func (b *bench) rss() float64 { return b.metric("process_resident_memory_bytes") }

// metric reads one unlabelled metric from the executor's /metrics; 0 if unavailable.
func (b *bench) metric(name string) float64 {
	resp, err := http.Get(b.metrics)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// inFlight counts running bench_lab runs.
func (b *bench) inFlight(ctx context.Context) int {
	var n int
	_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE job_type = 'bench_lab' AND status = 'running'`).Scan(&n)
	return n
}
