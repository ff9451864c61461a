package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/harness"
)

// dispatch sends n runs of jobType (payloads goal(first)…goal(first+n-1)) in batches of
// at most 500 and returns their ids.
func (b *bench) dispatch(ctx context.Context, jobType string, first, n int) ([]string, error) {
	var ids []string
	for len(ids) < n {
		var items []any
		for i := len(ids); i < n && len(items) < 500; i++ {
			items = append(items, map[string]any{"job_type": jobType, "payload": goal(first + i)})
		}
		var out struct {
			Accepted int `json:"accepted"`
			Items    []struct {
				Status int `json:"status"`
				Result struct {
					JobID string `json:"jobId"`
				} `json:"result"`
				Error map[string]any `json:"error"`
			} `json:"items"`
		}
		if err := b.h.Admin(ctx, http.MethodPost, "/api/v1/dispatch/batch", map[string]any{"items": items}, &out); err != nil {
			return ids, err
		}
		for _, it := range out.Items {
			if it.Result.JobID == "" {
				return ids, fmt.Errorf("dispatch refused (%d): %v", it.Status, it.Error)
			}
			ids = append(ids, it.Result.JobID)
		}
	}
	return ids, nil
}

// terminal lists the statuses a run ends in.
const terminal = `('completed', 'completed_max_iterations', 'completed_budget_exhausted', 'failed', 'timed_out',
	'cancelled', 'rejected', 'skipped')`

// waitStatus waits until none of ids is outside the statuses in (an SQL list), looking
// every 100 ms, at most limit.
func (b *bench) waitStatus(ctx context.Context, ids []string, in string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var left int
		if err := b.h.DB.QueryRow(ctx, `SELECT count(*) FROM runs WHERE id = ANY($1::uuid[]) AND status NOT IN `+in,
			ids).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d runs not in %s after %s", left, len(ids), in, limit)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// statuses counts the runs of ids by status.
func (b *bench) statuses(ctx context.Context, ids []string) (map[string]int, error) {
	rows, err := b.h.DB.Query(ctx, `SELECT status, count(*) FROM runs WHERE id = ANY($1::uuid[]) GROUP BY status`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// failures describes the errors of up to three failed runs of ids.
func (b *bench) failures(ctx context.Context, ids []string) string {
	rows, err := b.h.DB.Query(ctx, `SELECT coalesce(error::text, '') FROM runs
		WHERE id = ANY($1::uuid[]) AND status NOT IN ('completed', 'pending_review') LIMIT 3`, ids)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			return err.Error()
		}
		out = append(out, e)
	}
	return strings.Join(out, "; ")
}

// proc is what the bench reads of the executor process at one moment.
type proc struct {
	cpu        time.Duration // utime+stime since it started
	rss        int64
	heap       int64 // go_memstats_heap_inuse_bytes
	goroutines int64
}

func (b *bench) executorPID() int { return b.h.Proc(harness.Executor).PID() }

// sample reads the executor's CPU and RSS from /proc and its heap and goroutines from its
// /metrics.
func (b *bench) sample(ctx context.Context) (proc, error) {
	pid := b.executorPID()
	var p proc
	var err error
	if p.cpu, err = hostcpu.Process(pid); err != nil {
		return p, err
	}
	if p.rss, err = hostcpu.RSS(pid); err != nil {
		return p, err
	}
	m, err := scrape(ctx, "http://"+b.h.Addr(harness.Executor)+"/metrics")
	if err != nil {
		return p, err
	}
	p.heap, p.goroutines = int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_goroutines"])
	return p, nil
}

// scrape reads the unlabelled samples of a Prometheus text page.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func kib(n float64) string { return fmt.Sprintf("%.0f KiB", n/(1<<10)) }

// stepOverhead returns, for each agent step (chain_step span) of the runs, its duration and
// the time its llm_call and tool_call spans took, in seconds.
func (b *bench) stepOverhead(ctx context.Context, ids []string) (steps, calls []float64, err error) {
	rows, err := b.h.DB.Query(ctx, `
		WITH RECURSIVE step AS (
			SELECT id, started_at, ended_at FROM spans WHERE run_id = ANY($1::uuid[]) AND type = 'chain_step'
		), tree AS (
			SELECT s.id AS step, sp.id, sp.type, sp.started_at, sp.ended_at
			FROM step s JOIN spans sp ON sp.parent_id = s.id AND sp.run_id = ANY($1::uuid[])
			UNION ALL
			SELECT t.step, sp.id, sp.type, sp.started_at, sp.ended_at
			FROM tree t JOIN spans sp ON sp.parent_id = t.id AND sp.run_id = ANY($1::uuid[])
		)
		SELECT extract(epoch FROM s.ended_at - s.started_at)::float8,
			coalesce((SELECT sum(extract(epoch FROM t.ended_at - t.started_at)) FROM tree t
				WHERE t.step = s.id AND t.type IN ('llm_call', 'tool_call')), 0)::float8
		FROM step s WHERE s.ended_at IS NOT NULL`, ids)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s, c float64
		if err := rows.Scan(&s, &c); err != nil {
			return nil, nil, err
		}
		steps, calls = append(steps, s), append(calls, c)
	}
	return steps, calls, rows.Err()
}
