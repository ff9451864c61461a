package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/load"
	"github.com/switchyard-ai/switchyard/harness"
)

// job is one dispatch of the load.
type job struct {
	tag, kind string // the tag starts the prompt and is the idempotency key
	id        string // set once accepted
	accepted  time.Time
	lastErr   string // why the last attempt was not accepted
}

// phase is one fault's run: the load, the fault, the accounting.
type phase struct {
	p      *Platform
	f      Fault
	cfg    Config
	client *http.Client
	prefix string // makes this phase's prompts unique across phases and runs

	seq  atomic.Int64
	mu   sync.Mutex
	jobs []*job
}

func runPhase(ctx context.Context, p *Platform, f Fault, cfg Config) (Report, error) {
	ph := &phase{p: p, f: f, cfg: cfg, prefix: f.Name + "-" + strings.ToLower(rand.Text()[:6]),
		client: &http.Client{Timeout: 10 * time.Second}}
	defer ph.client.CloseIdleConnections()
	cfg.Log("%s: %s", f.Name, f.What)
	if err := ph.ready(ctx); err != nil {
		return Report{}, err
	}

	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	start := time.Now()
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		load.Run(loadCtx, cfg.Rate, cfg.Load, 1000, ph.dispatch)
	}()

	// The fault's moment and its outage are the experiment's own clock, not a wait for
	// something to happen.
	if err := sleepCtx(ctx, time.Until(start.Add(cfg.At))); err != nil {
		return Report{}, err
	}
	tFault := time.Now()
	restore, err := f.Inject(ctx, p, cfg.Outage)
	if err != nil {
		return Report{}, fmt.Errorf("injecting: %w", err)
	}
	cfg.Log("%s: injected at %.1fs", f.Name, tFault.Sub(start).Seconds())
	if err := sleepCtx(ctx, cfg.Outage); err != nil {
		return Report{}, err
	}
	if err := restore(ctx); err != nil {
		return Report{}, fmt.Errorf("recovering: %w", err)
	}
	tRestore := time.Now()
	cfg.Log("%s: recovered at %.1fs (%.1fs after the fault)", f.Name, tRestore.Sub(start).Seconds(), tRestore.Sub(tFault).Seconds())
	select {
	case <-loaded:
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	loadEnd := time.Now()
	cfg.Log("%s: load done, %d dispatched; waiting up to %s for every run to end", f.Name, len(ph.jobs), cfg.Window)

	runs, err := ph.waitEnded(ctx, loadEnd.Add(cfg.Window))
	if err != nil {
		return Report{}, err
	}
	r, err := ph.account(ctx, runs)
	if err != nil {
		return Report{}, err
	}
	r.Recover, r.Drain = recovery(ph.jobs, runs, tFault, tRestore)
	return r, nil
}

// ready waits until the platform is healthy and zeroes the simulator's and the demo tool's
// counters, so that what they count is this phase's.
func (ph *phase) ready(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ph.p.Healthy(hctx); err != nil {
		return err
	}
	if err := simControl(ctx, ph.p, http.MethodDelete, nil); err != nil {
		return err
	}
	if err := harness.JSON(ctx, http.MethodPost, ph.p.SimURL+"/sim/reset", nil, nil, nil); err != nil {
		return err
	}
	return harness.JSON(ctx, http.MethodPost, ph.p.ToolURL+"/stats/reset", nil, nil, nil)
}

// dispatch is one operation of the load: a job with a unique prompt and an idempotency
// key, retried with that key (as a client must after a 5xx, a 429 or a broken connection)
// until it is accepted or DispatchTimeout has passed.
func (ph *phase) dispatch(ctx context.Context) error {
	n := ph.seq.Add(1)
	j := &job{tag: fmt.Sprintf("%s-%05d", ph.prefix, n), kind: "demo_llm"}
	// An even spread of demo_react and chains through the load, whatever the shares.
	// (A chain takes the place of what would have been either.)
	if c := int(float64(n) * ph.cfg.ChainShare); c != int(float64(n-1)*ph.cfg.ChainShare) {
		j.kind = "demo_research"
		if c%2 == 0 { // every other chain a workflow: the chain engine under GitHub's rules
			j.kind = "content-pipeline"
		}
	} else if int(float64(n)*ph.cfg.ReactShare) != int(float64(n-1)*ph.cfg.ReactShare) {
		j.kind = "demo_react"
	}
	ph.mu.Lock()
	ph.jobs = append(ph.jobs, j)
	ph.mu.Unlock()

	// The sim-llm fills tool arguments with the first words of the prompt: the tag makes
	// each ticket's title, and each request, unique.
	payload := map[string]any{"prompt": j.tag + " needs a ticket and the weather in Lisbon"}
	switch j.kind {
	case "demo_research":
		payload = map[string]any{"topic": j.tag} // in every step's prompt: each call unique
	case "content-pipeline":
		payload = map[string]any{"source": j.tag}
	}
	body, _ := json.Marshal(map[string]any{"job_type": j.kind, "idempotency_key": j.tag, "payload": payload})
	deadline := time.Now().Add(ph.cfg.DispatchTimeout)
	backoff := 100 * time.Millisecond
	for {
		id, retry, err := ph.post(ctx, body)
		if err == nil {
			ph.mu.Lock()
			j.id, j.accepted = id, time.Now()
			ph.mu.Unlock()
			return nil
		}
		ph.mu.Lock()
		j.lastErr = err.Error()
		ph.mu.Unlock()
		if !retry || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// post sends one dispatch: the job id, or whether the failure is worth retrying.
func (ph *phase) post(ctx context.Context, body []byte) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ph.p.DispatcherURL+"/api/v1/dispatch", bytes.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+ph.p.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ph.client.Do(req)
	if err != nil {
		return "", true, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		JobID string `json:"jobId"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(raw, &out)
	switch {
	case (resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK) && out.JobID != "":
		return out.JobID, false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return "", true, fmt.Errorf("HTTP %d %s", resp.StatusCode, out.Code)
	}
	return "", false, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
}

// runState is what Postgres says of one accepted run.
type runState struct {
	status   string
	finished time.Time
	llmCalls int64
	code     string // error code of a failed run
}

// terminal are the statuses a run ends in.
var terminal = map[string]bool{"completed": true, "completed_max_iterations": true, "completed_budget_exhausted": true,
	"failed": true, "timed_out": true, "cancelled": true, "rejected": true, "skipped": true}

func completed(status string) bool { return strings.HasPrefix(status, "completed") }

// waitEnded polls Postgres until every accepted run has ended or the deadline has passed,
// and returns what it last read.
func (ph *phase) waitEnded(ctx context.Context, deadline time.Time) (map[string]runState, error) {
	var ids []string
	for _, j := range ph.jobs {
		if j.id != "" {
			ids = append(ids, j.id)
		}
	}
	runs := map[string]runState{}
	for {
		got, err := ph.readRuns(ctx, ids)
		if err == nil {
			runs = got
			ended := 0
			for _, r := range runs {
				if terminal[r.status] {
					ended++
				}
			}
			if ended == len(ids) {
				return runs, nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil && len(runs) == 0 {
				return nil, fmt.Errorf("reading the runs: %w", err)
			}
			return runs, nil
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func (ph *phase) readRuns(ctx context.Context, ids []string) (map[string]runState, error) {
	rows, err := ph.p.DB.Query(ctx, `SELECT id::text, status, coalesce(finished_at, 'epoch'), llm_calls, coalesce(error->>'code', '')
		FROM runs WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]runState, len(ids))
	for rows.Next() {
		var id string
		var r runState
		if err := rows.Scan(&id, &r.status, &r.finished, &r.llmCalls, &r.code); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// recovery measures, from the fault: when a run accepted after it first completed (the
// platform does work again), and when every run accepted before the recovery had ended
// (the backlog drained). -1 is never.
func recovery(jobs []*job, runs map[string]runState, tFault, tRestore time.Time) (time.Duration, time.Duration) {
	back, drain := time.Duration(-1), time.Duration(0)
	for _, j := range jobs {
		if j.id == "" {
			continue
		}
		r, ok := runs[j.id]
		if j.accepted.After(tFault) && ok && completed(r.status) {
			if d := r.finished.Sub(tFault); back < 0 || d < back {
				back = d
			}
		}
		if !j.accepted.After(tRestore) && drain >= 0 {
			if !ok || !terminal[r.status] {
				drain = -1
			} else if d := r.finished.Sub(tFault); d > drain {
				drain = d
			}
		}
	}
	return back, drain
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// simControl starts (POST, with a body) or ends (DELETE) a burst of sim-llm failures.
func simControl(ctx context.Context, p *Platform, method string, body any) error {
	return harness.JSON(ctx, method, p.SimURL+"/sim/faults", nil, body, nil)
}

// ms formats a duration in seconds with one decimal, or "never".
func ms(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}
