// Command coordbench measures the chain coordinator alone: how many step transitions one
// dispatcher applies per second, and the dispatcher's CPU per transition. It starts
// Postgres, Redis and a dispatcher of its own (no executor, router or LLM) and plays the
// executor itself, as cheaply as it can: it consumes the steps' queue, moves each step run
// queued → running → completed in Postgres through the run store and reports its end on
// the coordinator queue, as the executor does. The coordinator then records the end,
// dispatches the next step through the pipeline and enqueues it — the work measured.
//
// Each chain is -steps sequential steps; -chains run at once. With -workflow the chain is
// a workflow (package workflow) of the same steps: -workflow jobs, -steps jobs one after
// another, each one step; -workflow steps, one job of -steps steps. Either compiles to the
// same chain, whose transitions also decode the workflow's plan and evaluate its Rules
// (if, with). A transition is a chain start or a step end. Also reported: the coordinator's own hand-off, from a step run's
// end (its finished_at) to the next step's run being recorded (its created_at).
//
//	go run ./bench/cmd/coordbench -chains 50 -steps 20
//	go run ./bench/cmd/coordbench -chains 50 -steps 20 -workflow jobs
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/bench/internal/chainwait"
	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/stats"
	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func main() {
	chains := flag.Int("chains", 50, "chains in flight at once")
	steps := flag.Int("steps", 20, "sequential steps per chain")
	rounds := flag.Int("rounds", 2, "times each of the -chains slots runs a chain")
	dir := flag.String("dir", ".run/coordbench", "directory of the bench's stores, logs and binaries")
	pgPort := flag.Int("pg-port", 25437, "the bench's Postgres port")
	redisPort := flag.Int("redis-port", 26384, "the bench's Redis port")
	pprof := flag.String("pprof", "", "when set, the dispatcher serves Go's profiler there (SWITCHYARD_PPROF_ADDR)")
	conc := flag.Int("concurrency", 0, "the coordinator's concurrency (SWITCHYARD_COORDINATOR_CONCURRENCY); 0: its default")
	wf := flag.String("workflow", "", "run a workflow instead of a chain skill: jobs (-steps jobs of one step, one after "+
		"another) or steps (one job of -steps steps)")
	flag.Parse()
	var env []string
	if *pprof != "" {
		env = append(env, "SWITCHYARD_PPROF_ADDR="+*pprof)
	}
	if *conc > 0 {
		env = append(env, fmt.Sprintf("SWITCHYARD_COORDINATOR_CONCURRENCY=%d", *conc))
	}
	if err := bench(*dir, *pgPort, *redisPort, *chains, *steps, *rounds, *wf, env); err != nil {
		fmt.Fprintln(os.Stderr, "coordbench:", err)
		os.Exit(1)
	}
}

func bench(dir string, pgPort, redisPort, chains, steps, rounds int, wf string, env []string) error {
	ctx := context.Background()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "bin")
	if err := harness.Build(ctx, bin, harness.Dispatcher, harness.Router); err != nil {
		return err
	}
	st, err := harness.StartStores(ctx, filepath.Join(dir, "stores"), pgPort, redisPort)
	if err != nil {
		return err
	}
	defer st.Stop(context.WithoutCancel(ctx))
	h, err := harness.New(ctx, harness.Options{Dir: dir, Bin: bin, DatabaseURL: st.DBURL, RedisURL: st.RedisURL,
		Bootstrap: true, Env: env})
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := h.Start(ctx, harness.Dispatcher); err != nil {
		return err
	}
	db, err := pgxpool.New(ctx, st.DBURL)
	if err != nil {
		return err
	}
	defer db.Close()
	var orgID string
	if err := db.QueryRow(ctx, `SELECT id FROM orgs WHERE slug = 'dev'`).Scan(&orgID); err != nil {
		return err
	}
	chainSkill := skill.Skill{JobType: "cb_chain", ExecutionType: "chain", Enabled: true, Chain: definition(steps)}
	kind, prefix, suffix := "chains", "", ""
	switch wf {
	case "":
	case "jobs", "steps":
		chainSkill.Chain, chainSkill.Workflow = nil, workflowFile(steps, wf == "steps")
		kind = "workflows (" + wf + ")"
		if wf == "jobs" {
			suffix = "/x"
		} else {
			prefix = "j/"
		}
	default:
		return fmt.Errorf("-workflow: %q is neither jobs nor steps", wf)
	}
	for _, s := range []skill.Skill{{JobType: "cb_step", ExecutionType: "llm_only", Enabled: true}, chainSkill} {
		if _, _, err := skill.Put(ctx, db, orgID, s, "coordbench"); err != nil {
			return err
		}
	}
	opt, err := redisconn.Asynq(st.RedisURL)
	if err != nil {
		return err
	}
	done := &executor{db: db, client: queue.NewClient(opt)}
	defer done.client.Close()
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 32, Queues: queue.Tiers("default"),
		TaskCheckInterval: time.Millisecond, Logger: queue.Logger(slog.New(slog.DiscardHandler))})
	if err := srv.Start(done); err != nil {
		return err
	}
	defer srv.Shutdown()

	pid := h.PIDs(harness.Dispatcher)
	if len(pid) == 0 {
		return errors.New("no dispatcher pid")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	cpu0, err := hostcpu.Process(pid[0])
	if err != nil {
		return err
	}
	host0, _ := hostcpu.Read()
	start := time.Now()
	ids := make(chan string, chains*rounds)
	errs := make(chan error, chains)
	w := chainwait.New(db, 5*time.Millisecond)
	defer w.Stop()
	for range chains {
		go func() {
			for range rounds {
				id, err := dispatch(ctx, c, h.DispatcherURL, h.AdminKey)
				if err == nil {
					err = waitEnd(ctx, w, id)
				}
				if err != nil {
					errs <- err
					return
				}
				ids <- id
			}
			errs <- nil
		}()
	}
	for range chains {
		if err := <-errs; err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	cpu1, err := hostcpu.Process(pid[0])
	if err != nil {
		return err
	}
	host1, _ := hostcpu.Read()
	close(ids)
	n := chains * rounds
	transitions := n * (steps + 1)
	handoffs, err := handoffs(ctx, db, prefix, suffix)
	if err != nil {
		return err
	}
	hs := stats.Summarize(handoffs)
	usage := host1.Since(host0)
	fmt.Printf("coordbench: %d %s of %d sequential steps, %d in flight; the bench plays the executor\n", n, kind, steps, chains)
	fmt.Printf("transitions: %d in %.1f s = %.0f/s\n", transitions, elapsed.Seconds(), float64(transitions)/elapsed.Seconds())
	fmt.Printf("dispatcher CPU: %.0f ms = %.3f ms per transition (machine busy %.0f%%)\n",
		float64((cpu1 - cpu0).Milliseconds()), float64((cpu1-cpu0).Microseconds())/1000/float64(transitions),
		usage.Busy*100)
	fmt.Printf("coordinator hand-off (step run finished_at → next step run created_at): p50 %.2f ms, p99 %.2f ms, n %d\n",
		ms(hs.P50), ms(hs.P99), hs.N)
	out, _ := json.Marshal(map[string]any{"chains": n, "steps": steps, "in_flight": chains, "workflow": wf,
		"transitions_per_s":     float64(transitions) / elapsed.Seconds(),
		"cpu_ms_per_transition": float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(transitions),
		"handoff_p50_ms":        ms(hs.P50), "handoff_p99_ms": ms(hs.P99)})
	fmt.Println(string(out))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// definition is a chain of n sequential steps of cb_step.
func definition(n int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"steps":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"step_id":"s%d","job_type":"cb_step","payload":{"prompt":"step %d"}`, i, i)
		if i > 0 {
			fmt.Fprintf(&b, `,"depends_on":["s%d"]`, i-1)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return json.RawMessage(b.String())
}

// workflowFile is a workflow of n steps calling cb_step with the same payload as
// definition's: n jobs one after another (s0 … s<n-1>), each one step (id x), whose chain
// step ids are "s<i>/x"; or, oneJob, a job j of the steps s0 … s<n-1> ("j/s<i>").
func workflowFile(n int, oneJob bool) string {
	var b strings.Builder
	b.WriteString("name: cb_chain\non: workflow_dispatch\njobs:\n")
	if oneJob {
		b.WriteString("  j:\n    runs-on: any\n    steps:\n")
		for i := range n {
			fmt.Fprintf(&b, "      - id: s%d\n        uses: ./skills/cb_step\n        with:\n          prompt: step %d\n", i, i)
		}
		return b.String()
	}
	for i := range n {
		fmt.Fprintf(&b, "  s%d:\n    runs-on: any\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    needs: s%d\n", i-1)
		}
		fmt.Fprintf(&b, "    steps:\n      - id: x\n        uses: ./skills/cb_step\n        with:\n          prompt: step %d\n", i)
	}
	return b.String()
}

func dispatch(ctx context.Context, c *http.Client, url, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/dispatch",
		strings.NewReader(`{"job_type":"cb_chain","payload":{}}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var res struct {
		ChainID string `json:"chainId"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("dispatch: %d %v", resp.StatusCode, err)
	}
	return res.ChainID, nil
}

// waitEnd waits until the chain has completed.
func waitEnd(ctx context.Context, w *chainwait.Waiter, id string) error {
	status, err := w.Wait(ctx, id, 10*time.Minute)
	if err == nil && status != "completed" {
		err = fmt.Errorf("chain %s ended %s", id, status)
	}
	return err
}

// handoffs reads, for every step run after the first of each chain, the time from its
// predecessor's end to its own creation. Step i is "<prefix>s<i><suffix>".
func handoffs(ctx context.Context, db *pgxpool.Pool, prefix, suffix string) ([]time.Duration, error) {
	rows, err := db.Query(ctx, `SELECT extract(epoch FROM (n.created_at - p.finished_at)) * 1e6
		FROM chain_steps ps JOIN runs p ON p.id = ps.run_id
		JOIN chain_steps ns ON ns.chain_id = ps.chain_id
			AND ns.step_id = $1 || 's' || (substring(ps.step_id FROM '^' || $1 || 's([0-9]+)')::int + 1) || $2
		JOIN runs n ON n.id = ns.run_id`, prefix, suffix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var us float64
		if err := rows.Scan(&us); err != nil {
			return nil, err
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, rows.Err()
}

// executor plays the executor's part cheaply: claim, complete, report.
type executor struct {
	db     *pgxpool.Pool
	client *queue.Client
	n      atomic.Int64
}

func (e *executor) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var task queue.RunTask
	if err := json.Unmarshal(t.Payload(), &task); err != nil {
		return err
	}
	rs := runstore.New(e.db)
	if _, err := rs.Transition(ctx, task.RunID, []run.Status{run.Queued}, run.Running, runstore.Change{CountAttempt: true}); err != nil {
		return err
	}
	if _, err := rs.Transition(ctx, task.RunID, []run.Status{run.Running}, run.Completed,
		runstore.Change{Output: json.RawMessage(`{"content":"ok"}`)}); err != nil {
		return err
	}
	var chainID string
	if err := e.db.QueryRow(ctx, `SELECT chain_id::text FROM runs WHERE id = $1`, task.RunID).Scan(&chainID); err != nil {
		return err
	}
	rt, err := queue.NewStepDoneTask(queue.StepDone{ChainID: chainID, RunID: task.RunID, Status: run.Completed})
	if err != nil {
		return err
	}
	_, err = e.client.EnqueueContext(ctx, rt)
	e.n.Add(1)
	return err
}
