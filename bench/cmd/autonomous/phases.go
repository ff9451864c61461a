package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/stats"
)

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// stepPhase measures the executor's time per agent step outside the LLM and tool calls.
func (b *bench) stepPhase(ctx context.Context) error {
	o := b.o
	idle0, err := b.sample(ctx)
	if err != nil {
		return err
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	p0, err := b.sample(ctx)
	if err != nil {
		return err
	}
	idle := float64(p0.cpu-idle0.cpu) / 5 / float64(time.Second) // CPU seconds per second
	start := time.Now()
	ids, err := b.dispatch(ctx, stepSkill, 0, o.stepRuns)
	if err != nil {
		return err
	}
	if err := b.waitStatus(ctx, ids, terminal, 10*time.Minute); err != nil {
		return err
	}
	wall := time.Since(start)
	p1, err := b.sample(ctx)
	if err != nil {
		return err
	}
	st, err := b.statuses(ctx, ids)
	if err != nil {
		return err
	}
	if st["completed"] != len(ids) {
		return fmt.Errorf("not every agent completed: %v: %s", st, b.failures(ctx, ids))
	}
	var steps, llm, tools int
	if err := b.h.DB.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum((output->>'steps_executed')::int), 0) FROM runs WHERE id = ANY($1::uuid[])),
			(SELECT count(*) FROM spans WHERE run_id = ANY($1::uuid[]) AND type = 'llm_call'),
			(SELECT count(*) FROM spans WHERE run_id = ANY($1::uuid[]) AND type = 'tool_call')`, ids).
		Scan(&steps, &llm, &tools); err != nil {
		return err
	}
	cpu := p1.cpu - p0.cpu
	fmt.Printf("\nstep: %d agents × %d steps at once (odd steps one demo_weather call, LLM answers in %s): "+
		"%d steps, %d LLM calls, %d tool calls in %s\n", o.stepRuns, o.steps, quick, steps, llm, tools, wall.Round(time.Millisecond))
	fmt.Printf("step: executor CPU %s over the phase = %.2f ms per step (%.2f ms per LLM or tool call); "+
		"idle executor before: %.1f ms CPU per s\n", cpu.Round(time.Millisecond),
		float64(cpu.Microseconds())/1000/float64(steps), float64(cpu.Microseconds())/1000/float64(llm+tools), idle*1000)
	stepSecs, callSecs, err := b.stepOverhead(ctx, ids)
	if err != nil {
		return err
	}
	var over, whole []time.Duration
	for i := range stepSecs {
		over = append(over, seconds(stepSecs[i]-callSecs[i]))
		whole = append(whole, seconds(stepSecs[i]))
	}
	fmt.Printf("step: wall-clock per step outside its LLM and tool calls (chain_step span − llm_call/tool_call spans): %s\n",
		stats.Summarize(over))
	fmt.Printf("step: whole step span: %s\n", stats.Summarize(whole))
	return nil
}

// labPhase keeps -lab-runs agents in flight with the lab latency for -lab-for.
func (b *bench) labPhase(ctx context.Context) error {
	o := b.o
	before, err := b.sample(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	ids, err := b.dispatch(ctx, labSkill, 0, o.labRuns)
	if err != nil {
		return err
	}
	all := slices.Clone(ids)
	inflight := ids
	var during []proc
	lastSample := time.Time{}
	for time.Since(start) < o.labFor {
		rows, err := b.h.DB.Query(ctx, `SELECT id::text FROM runs WHERE id = ANY($1::uuid[]) AND status IN `+terminal, inflight)
		if err != nil {
			return err
		}
		ended := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ended[id] = true
		}
		rows.Close()
		if len(ended) > 0 {
			inflight = slices.DeleteFunc(inflight, func(id string) bool { return ended[id] })
			more, err := b.dispatch(ctx, labSkill, len(all), len(ended))
			if err != nil {
				return err
			}
			inflight, all = append(inflight, more...), append(all, more...)
		}
		if time.Since(start) >= o.labWarm && time.Since(lastSample) >= time.Second {
			p, err := b.sample(ctx)
			if err != nil {
				return err
			}
			during, lastSample = append(during, p), time.Now()
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	end := time.Now()
	logf("lab: %d runs dispatched; waiting for the %d in flight", len(all), len(inflight))
	if err := b.waitStatus(ctx, inflight, terminal, 10*time.Minute); err != nil {
		return err
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	after, err := b.sample(ctx)
	if err != nil {
		return err
	}
	st, err := b.statuses(ctx, all)
	if err != nil {
		return err
	}
	// Runs that ended inside the measured window, and what their time went to.
	var done int
	var runSecs, llmSecs, llmMean float64
	if err := b.h.DB.QueryRow(ctx, `
		WITH r AS (SELECT id, extract(epoch FROM finished_at - started_at) AS secs FROM runs
			WHERE id = ANY($1::uuid[]) AND status = 'completed' AND finished_at >= $2 AND finished_at < $3),
		l AS (SELECT run_id, sum(extract(epoch FROM ended_at - started_at)) AS secs, count(*) AS n FROM spans
			WHERE run_id IN (SELECT id FROM r) AND type = 'llm_call' GROUP BY run_id)
		SELECT count(*), coalesce(avg(r.secs), 0)::float8, coalesce(avg(l.secs), 0)::float8,
			coalesce(sum(l.secs) / nullif(sum(l.n), 0), 0)::float8
		FROM r LEFT JOIN l ON l.run_id = r.id`, all, start.Add(o.labWarm), end).
		Scan(&done, &runSecs, &llmSecs, &llmMean); err != nil {
		return err
	}
	window := o.labFor - o.labWarm
	calls := 2*o.labSteps + 2
	workers := min(o.labRuns, o.concurrency)
	theory := float64(workers) / (float64(calls) * o.latencyMean.Seconds())
	got := float64(done) / window.Seconds()
	fmt.Printf("\nlab: %d agents of %d llm_only steps (%d LLM calls each) kept in flight for %s, latency %s; %d runs in all: %v\n",
		o.labRuns, o.labSteps, calls, o.labFor, o.latency, len(all), st)
	fmt.Printf("lab: throughput over the last %s: %d runs = %.2f runs/s; theoretical %d workers / (%d calls × %s mean latency) = %.2f runs/s: %.0f%%\n",
		window, done, got, workers, calls, o.latencyMean, theory, 100*got/theory)
	fmt.Printf("lab: a run took %.1f s on average (started → finished), %.1f s of it in its %d LLM calls (mean call %.2f s as the executor saw it)\n",
		runSecs, llmSecs, calls, llmMean)
	if llmMean > 0 {
		at := float64(workers) / (float64(calls) * llmMean)
		fmt.Printf("lab: theoretical at the measured mean call: %d / (%d × %.2f s) = %.2f runs/s: %.0f%%\n",
			workers, calls, llmMean, at, 100*got/at)
	}
	var rss, heap, gr []float64
	for _, p := range during {
		rss, heap, gr = append(rss, float64(p.rss)), append(heap, float64(p.heap)), append(gr, float64(p.goroutines))
	}
	meanRSS, meanHeap := mean(rss), mean(heap)
	fmt.Printf("lab: executor RSS before %s, during %s (mean of %d samples; max %s), after %s; per run in flight %s\n",
		mib(before.rss), mib(int64(meanRSS)), len(during), mib(int64(slices.Max(rss))), mib(after.rss),
		kib((meanRSS-float64(before.rss))/float64(o.labRuns)))
	fmt.Printf("lab: executor Go heap in use before %s, during %s, after %s; per run in flight %s; goroutines before %d, during %.0f, after %d\n",
		mib(before.heap), mib(int64(meanHeap)), mib(after.heap), kib((meanHeap-float64(before.heap))/float64(o.labRuns)),
		before.goroutines, mean(gr), after.goroutines)
	return nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// pausedPhase pauses -paused agents for approval and checks that they hold no worker.
func (b *bench) pausedPhase(ctx context.Context) error {
	o := b.o
	before, err := b.sample(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	ids, err := b.dispatch(ctx, pausedSkill, 0, o.paused)
	if err != nil {
		return err
	}
	if err := b.waitStatus(ctx, ids, `('pending_review', 'failed', 'timed_out', 'cancelled')`, 10*time.Minute); err != nil {
		return err
	}
	wall := time.Since(start)
	st, err := b.statuses(ctx, ids)
	if err != nil {
		return err
	}
	if st["pending_review"] != len(ids) {
		return fmt.Errorf("not every agent paused: %v: %s", st, b.failures(ctx, ids))
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	after, err := b.sample(ctx)
	if err != nil {
		return err
	}
	// Tasks asynq holds as being processed on the bench queue's tiers: a paused run holds none.
	active := 0
	for _, tier := range []string{"critical", "high", "normal", "low"} {
		n, err := b.h.Redis.LLen(ctx, "asynq:{"+queueName+":"+tier+"}:active").Result()
		if err != nil {
			return err
		}
		active += int(n)
	}
	plain, err := b.dispatch(ctx, plainSkill, 0, 1)
	if err != nil {
		return err
	}
	if err := b.waitStatus(ctx, plain, terminal, time.Minute); err != nil {
		return err
	}
	var status string
	var wait, total float64
	if err := b.h.DB.QueryRow(ctx, `SELECT status, extract(epoch FROM started_at - queued_at)::float8,
		extract(epoch FROM finished_at - queued_at)::float8 FROM runs WHERE id = $1`, plain[0]).
		Scan(&status, &wait, &total); err != nil {
		return err
	}
	fmt.Printf("\npaused: %d agents paused pending_review (plan, then the gated create_ticket call) in %s; queue %q has %d workers\n",
		len(ids), wall.Round(time.Millisecond), queueName, o.concurrency)
	fmt.Printf("paused: executor goroutines before %d, after %d (%+d); RSS before %s, after %s (%s per paused run); Go heap before %s, after %s\n",
		before.goroutines, after.goroutines, after.goroutines-before.goroutines, mib(before.rss), mib(after.rss),
		kib(float64(after.rss-before.rss)/float64(len(ids))), mib(before.heap), mib(after.heap))
	fmt.Printf("paused: tasks active on the queue while they wait: %d; an llm_only run dispatched to the same queue: %s, "+
		"queue wait %.1f ms, dispatch → finished %.1f ms\n", active, status, wait*1000, total*1000)
	// What is left once the connections the pausing opened to the router have idled out.
	if o.settle <= 0 {
		return nil
	}
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}
	idle, err := b.sample(ctx)
	if err != nil {
		return err
	}
	if st, err := b.statuses(ctx, ids); err != nil || st["pending_review"] != len(ids) {
		return fmt.Errorf("the paused runs did not stay paused: %v %v", st, err)
	}
	fmt.Printf("paused: %s later, still %d paused: goroutines %d (%+d on before), RSS %s (%s per paused run), Go heap %s (%s per paused run)\n",
		o.settle, len(ids), idle.goroutines, idle.goroutines-before.goroutines, mib(idle.rss),
		kib(float64(idle.rss-before.rss)/float64(len(ids))), mib(idle.heap), kib(float64(idle.heap-before.heap)/float64(len(ids))))
	return nil
}
