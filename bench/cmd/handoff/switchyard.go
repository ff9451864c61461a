package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/bench/internal/chainwait"
	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/harness"
	"golang.org/x/sync/errgroup"
)

// chainSkill is the bench's chain: three llm_only steps one after another (each a
// demo_llm call to sim-llm at zero latency), dispatched like any chain.
const chainSkill = "bench_handoff_chain"

// The bench's workflows (issue 21), registered beside the chain and run on the same
// platform: three jobs one after another, each one step (a hand-off between jobs), and
// one job of three steps (a hand-off between steps of a job); every step the chain's
// demo_llm call.
const (
	jobsWorkflow  = "bench_handoff_wf_jobs"
	stepsWorkflow = "bench_handoff_wf_steps"
)

var benchWorkflows = map[string]string{
	jobsWorkflow: `name: bench_handoff_wf_jobs
on: workflow_dispatch
jobs:
  j1:
    runs-on: any
    steps:
      - {id: s, uses: ./skills/demo_llm, with: {prompt: Step s1}}
  j2:
    runs-on: any
    needs: j1
    steps:
      - {id: s, uses: ./skills/demo_llm, with: {prompt: Step s2}}
  j3:
    runs-on: any
    needs: j2
    steps:
      - {id: s, uses: ./skills/demo_llm, with: {prompt: Step s3}}
`,
	stepsWorkflow: `name: bench_handoff_wf_steps
on: workflow_dispatch
jobs:
  j:
    runs-on: any
    steps:
      - {id: s1, uses: ./skills/demo_llm, with: {prompt: Step s1}}
      - {id: s2, uses: ./skills/demo_llm, with: {prompt: Step s2}}
      - {id: s3, uses: ./skills/demo_llm, with: {prompt: Step s3}}
`,
}

// switchyardSystems are the Switchyard systems: each a skill of three sequential steps
// on the one platform, and the chain step ids of its two hand-offs.
var switchyardSystems = map[string]struct {
	jobType string
	pairs   [][2]string
}{
	"switchyard":          {chainSkill, [][2]string{{"s1", "s2"}, {"s2", "s3"}}},
	"switchyard-wf-jobs":  {jobsWorkflow, [][2]string{{"j1/s", "j2/s"}, {"j2/s", "j3/s"}}},
	"switchyard-wf-steps": {stepsWorkflow, [][2]string{{"j/s1", "j/s2"}, {"j/s2", "j/s3"}}},
}

// switchyard is one of switchyardSystems on the platform.
type switchyard struct {
	*platform
	name, jobType string
	pairs         [][2]string
}

func (s *switchyard) Name() string { return s.name }

// Close stops the platform once every system on it is closed.
func (s *switchyard) Close() {
	s.users--
	if s.users == 0 {
		s.platform.Close()
	}
}

// platform is every service of `make run` through the process harness, on a fresh
// database and Redis database of the test servers.
type platform struct {
	h     *harness.Harness
	http  *http.Client // many connections: up to 200 dispatches at once
	dir   string
	drop  func()
	users int
}

// system is the Switchyard system name on the platform.
func (p *platform) system(name string) *switchyard {
	sys := switchyardSystems[name]
	p.users++
	return &switchyard{platform: p, name: name, jobType: sys.jobType, pairs: sys.pairs}
}

// startSwitchyard starts the platform; the default queue gets concurrency slots, as a
// Temporal worker has 1,000 activity slots by default (worker.Options{}).
func startSwitchyard(ctx context.Context, bin string, concurrency int) (_ *platform, err error) {
	dir, err := os.MkdirTemp("", "handoff")
	if err != nil {
		return nil, err
	}
	s := &platform{dir: dir, drop: func() {},
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		if err := harness.Build(ctx, bin, harness.Platform...); err != nil {
			return nil, err
		}
	}
	dbURL, redisURL, drop, err := harness.TestkitStores()
	if err != nil {
		return nil, fmt.Errorf("switchyard: the test stores (eval \"$(scripts/stack.sh env test)\"): %w", err)
	}
	s.drop = drop
	if s.h, err = harness.New(ctx, harness.Options{Dir: dir, Bin: bin, DatabaseURL: dbURL, RedisURL: redisURL,
		RouterTLS: true, Bootstrap: true, LogLevel: "warn", StopGrace: 10 * time.Second,
		SimArgs: []string{"--log-level", "warn", "--model", "sim-fast=latency=0,output=constant:16",
			"--model", "sim-large=latency=0,output=constant:16"}}); err != nil {
		return nil, err
	}
	if err := s.h.StartAll(ctx, harness.Platform...); err != nil {
		return nil, err
	}
	// No organisation rate limit or backlog cap: the bench measures hand-offs, not them.
	if err := s.h.Admin(ctx, http.MethodPatch, "/api/v1/admin/org",
		map[string]any{"orgRpm": 0, "userRpm": 0, "maxBacklog": 0}, nil); err != nil {
		return nil, err
	}
	// The executor restarts the queue's servers when its row changes; the warm-up chains
	// of each phase run after that.
	if err := s.h.Admin(ctx, http.MethodPut, "/api/v1/admin/queues/default", map[string]any{"class": "cpu",
		"concurrency": concurrency, "timeoutSeconds": 300, "description": "General CPU work (hand-off bench)."}, nil); err != nil {
		return nil, err
	}
	step := func(id string, parents ...string) map[string]any {
		return map[string]any{"step_id": id, "job_type": "demo_llm", "depends_on": parents,
			"payload": map[string]any{"messages": []map[string]string{{"role": "user", "content": "Step " + id}}}}
	}
	skill := map[string]any{"job_type": chainSkill, "description": "Hand-off benchmark: three llm_only steps in a row.",
		"execution_type": "chain", "queue": "default", "risk_level": "minimal", "data_residency": "any",
		"timeout_seconds": 300, "chain": map[string]any{"on_failure": "abort",
			"steps": []any{step("s1"), step("s2", "s1"), step("s3", "s2")}}}
	if err := s.h.Admin(ctx, http.MethodPut, "/api/v1/skills/"+chainSkill, skill, nil); err != nil {
		return nil, err
	}
	for jobType, src := range benchWorkflows {
		wf := map[string]any{"job_type": jobType, "description": "Hand-off benchmark: a workflow of three steps in a row.",
			"execution_type": "chain", "queue": "default", "risk_level": "minimal", "data_residency": "any",
			"timeout_seconds": 300, "workflow": src}
		if err := s.h.Admin(ctx, http.MethodPut, "/api/v1/skills/"+jobType, wf, nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *switchyard) Phase(ctx context.Context, inflight, n, warmup int, _ string) (sample, error) {
	pids := append(append(append(s.h.PIDs(harness.Dispatcher), s.h.PIDs(harness.Executor)...),
		s.h.PIDs(harness.Router)...), s.h.PIDs(harness.Sim)...)
	cpuBefore, err := hostcpu.Processes(pids...)
	if err != nil {
		return sample{}, err
	}
	w := chainwait.New(s.h.DB, 10*time.Millisecond)
	defer w.Stop()
	if _, err := s.drive(ctx, w, inflight, warmup); err != nil {
		return sample{}, fmt.Errorf("warm-up: %w", err)
	}
	chains, err := s.drive(ctx, w, inflight, n)
	if err != nil {
		return sample{}, err
	}
	cpuAfter, err := hostcpu.Processes(pids...)
	if err != nil {
		return sample{}, err
	}
	smp, err := stepHandoffs(ctx, s.h.DB, chains, s.pairs)
	smp.cpu = cpuAfter - cpuBefore
	return smp, err
}

// drive dispatches n chains, inflight at a time (each when one before has ended), and
// returns their ids.
func (s *switchyard) drive(ctx context.Context, w *chainwait.Waiter, inflight, n int) ([]string, error) {
	var mu sync.Mutex
	var ids []string
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(inflight)
	for range n {
		g.Go(func() error {
			id, err := s.runOne(ctx, w)
			if err != nil {
				return err
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return nil
		})
	}
	return ids, g.Wait()
}

func (s *switchyard) runOne(ctx context.Context, w *chainwait.Waiter) (string, error) {
	var res struct {
		ChainID string `json:"chainId"`
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.h.DispatcherURL+"/api/v1/dispatch",
		strings.NewReader(`{"job_type":"`+s.jobType+`","payload":{}}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.h.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("dispatching %s: %s: %s", s.jobType, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", err
	}
	if res.ChainID == "" {
		return "", errors.New("dispatching the chain skill answered no chainId")
	}
	status, err := w.Wait(ctx, res.ChainID, 2*time.Minute)
	if err != nil {
		return "", err
	}
	if status != "completed" {
		return "", fmt.Errorf("chain %s ended %s", res.ChainID, status)
	}
	return res.ChainID, nil
}

// stepHandoffs reads the chains' steps from Postgres: for each chain and each pair of
// steps (for the chain, s1 → s2 and s2 → s3), the second's run started_at − the first's
// run finished_at (the latest attempt's run of each step, the one
// chain_steps names), each split at the next run's created_at into "coordinator" (the
// report reaching the coordinator, which dispatches the next step) and "pickup" (its
// queue transit to an executor's claim).
func stepHandoffs(ctx context.Context, db *pgxpool.Pool, chains []string, pairs [][2]string) (sample, error) {
	rows, err := db.Query(ctx, `SELECT cs.chain_id::text, cs.step_id, r.created_at, r.started_at, r.finished_at
		FROM chain_steps cs JOIN runs r ON r.id = cs.run_id
		WHERE cs.chain_id = ANY($1::uuid[]) AND cs.instance = -1`, chains)
	if err != nil {
		return sample{}, err
	}
	defer rows.Close()
	type span struct{ created, start, end *time.Time }
	steps := map[string]map[string]span{}
	for rows.Next() {
		var chain, step string
		var sp span
		if err := rows.Scan(&chain, &step, &sp.created, &sp.start, &sp.end); err != nil {
			return sample{}, err
		}
		if steps[chain] == nil {
			steps[chain] = map[string]span{}
		}
		steps[chain][step] = sp
	}
	if err := rows.Err(); err != nil {
		return sample{}, err
	}
	out := sample{parts: map[string][]time.Duration{}}
	for _, c := range chains {
		st := steps[c]
		for _, pair := range pairs {
			prev, next := st[pair[0]], st[pair[1]]
			if prev.end == nil || next.start == nil || next.created == nil {
				return sample{}, fmt.Errorf("chain %s: step %s or %s has no run times", c, pair[0], pair[1])
			}
			out.handoffs = append(out.handoffs, next.start.Sub(*prev.end))
			out.parts["coordinator"] = append(out.parts["coordinator"], next.created.Sub(*prev.end))
			out.parts["pickup"] = append(out.parts["pickup"], next.start.Sub(*next.created))
		}
	}
	return out, nil
}

func (s *platform) Close() {
	if s.h != nil {
		s.h.Close()
	}
	s.http.CloseIdleConnections()
	s.drop()
	os.RemoveAll(s.dir)
}
