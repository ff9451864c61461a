// Command chainscenario plays seed 003's scheduling experiment end to end through the
// platform: each session is a chain of llm_only steps (1 planner → 5 analysts → 1
// synthesizer → 3 reviewers → 1 final call, bench/internal/workload) dispatched to the
// dispatcher, coordinated by the coordinator, run by the executor through the provider
// router against sim-llm, under an RPM-bound or a TPM-bound limit, with constant or bursty
// arrivals. Each scenario runs under every router queue order (SWITCHYARD_ROUTER_QUEUE_ORDER:
// fifo, progress), on the same platform build, back to back and alternating which goes
// first from round to round; it reports mean and p95 chain makespan (the chain's
// created_at → finished_at in Postgres).
//
// It starts a Postgres and Redis of its own (scripts/stack.sh, -pg-port/-redis-port) and
// sim-llm, provider-router, executor and dispatcher through the process harness; the router
// is restarted with the order of each run. Every run gets its own model name at sim-llm
// and in the router (so its own limit buckets on both sides and a cold output estimator,
// as bench/cmd/scenario gives each run a fresh organisation) and its own skills: one
// llm_only skill per call type whose max_tokens is the call type's output (sim-llm's model
// always generates more, so max_tokens sets the size) and whose step payload is a prompt of
// the call type's size, and the chain skill tying them together.
//
// Time is compressed as bench/cmd/scenario compresses it: sim-llm runs with --time-scale
// 1/k, the router's limits are the seed's × k per real minute, arrivals k times closer, and
// makespans are reported × k. The executor does not park runs waiting for capacity
// (SWITCHYARD_CAPACITY_WAIT=0, -capacity-wait): the calls wait in the router's queue in its
// order, as in the seed.
//
//	go run ./bench/cmd/chainscenario -k 30 -chains 30 -profile rpm,tpm -arrival constant,bursty
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/bench/internal/routerstack"
	"github.com/switchyard-ai/switchyard/bench/internal/workload"
	"github.com/switchyard-ai/switchyard/harness"
)

// queueName is the bench's queue: as many workers as steps can wait at once.
const queueName = "chainscen"

type options struct {
	k                  float64
	chains, rounds     int
	profiles, arrivals []string
	orders             []string
	seed               uint64
	latency, capWait   string
	dir, bin           string
	pgPort, redisPort  int
	concurrency        int
}

func main() {
	var o options
	var profs, arrivals, orders string
	flag.Float64Var(&o.k, "k", 30, "time compression factor")
	flag.IntVar(&o.chains, "chains", 30, "chains (sessions) per run")
	flag.IntVar(&o.rounds, "rounds", 1, "times each scenario runs under every order (alternating which goes first)")
	flag.StringVar(&profs, "profile", "rpm,tpm", "rate-limit regimes: rpm, tpm")
	flag.StringVar(&arrivals, "arrival", "constant", "arrival patterns: "+workload.ArrivalHelp)
	flag.StringVar(&orders, "order", "fifo,progress", "router queue orders (SWITCHYARD_ROUTER_QUEUE_ORDER: fifo, progress, remaining) to compare, the first the baseline")
	flag.Uint64Var(&o.seed, "seed", 3, "seed of arrivals")
	flag.StringVar(&o.latency, "latency", workload.Latency, "sim-llm latency spec (uncompressed)")
	flag.StringVar(&o.capWait, "capacity-wait", "0", "the executor's SWITCHYARD_CAPACITY_WAIT (0: never park; real time)")
	flag.IntVar(&o.concurrency, "concurrency", 400, "the bench queue's concurrency (workers of the executor)")
	flag.StringVar(&o.dir, "dir", ".run/chainscenario", "directory of the bench's stores, logs and binaries")
	flag.StringVar(&o.bin, "bin", "", "directory holding the binaries (default: build them into -dir/bin)")
	flag.IntVar(&o.pgPort, "pg-port", 25439, "the bench's Postgres port")
	flag.IntVar(&o.redisPort, "redis-port", 26389, "the bench's Redis port")
	flag.Parse()
	o.profiles, o.arrivals, o.orders = strings.Split(profs, ","), strings.Split(arrivals, ","), strings.Split(orders, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "chainscenario:", err)
		os.Exit(1)
	}
}

// plan is one run: a scenario under one order, on models of its own.
type plan struct {
	profile, arrival, order string
	round                   int
	tag                     string // names the run's model and skills
}

// result is what one run measured.
type result struct {
	makespans   workload.Makespans
	failed      int
	upstream429 int64
	wall        time.Duration
	busy        float64 // the machine's busy share during the run
}

func run(ctx context.Context, o options) error {
	for _, p := range o.profiles {
		if _, ok := workload.Profiles[p]; !ok {
			return fmt.Errorf("unknown profile %q", p)
		}
	}
	for _, ord := range o.orders {
		if ord != "fifo" && ord != "progress" && ord != "remaining" {
			return fmt.Errorf("unknown order %q", ord)
		}
	}
	var plans []plan
	for _, p := range o.profiles {
		for _, a := range o.arrivals {
			for r := range o.rounds {
				for i := range o.orders {
					ord := o.orders[(i+r)%len(o.orders)] // alternate which order goes first
					plans = append(plans, plan{profile: p, arrival: a, order: ord, round: r,
						tag: fmt.Sprintf("cs%d", len(plans))})
				}
			}
		}
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		if err := harness.Build(ctx, bin, harness.Sim, harness.Router, harness.Executor, harness.Dispatcher); err != nil {
			return err
		}
	}
	st, err := harness.StartStores(ctx, filepath.Join(dir, "stores"), o.pgPort, o.redisPort)
	if err != nil {
		return err
	}
	defer st.Stop(context.WithoutCancel(ctx)) //nolint:errcheck
	simArgs := []string{"--time-scale", fmt.Sprint(1 / o.k), "--log-level", "warn"}
	for _, pl := range plans {
		simArgs = append(simArgs, "--model", workload.SimModel(pl.tag, o.latency, workload.Profiles[pl.profile]))
	}
	h, err := harness.New(ctx, harness.Options{Dir: dir, Bin: bin, DatabaseURL: st.DBURL, RedisURL: st.RedisURL,
		RouterTLS: true, Bootstrap: true, SimArgs: simArgs, LogLevel: "warn", StopGrace: 10 * time.Second,
		Env: []string{"SWITCHYARD_CAPACITY_WAIT=" + o.capWait}})
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.StartAll(ctx, harness.Sim, harness.Dispatcher); err != nil {
		return err
	}
	// The load is the bench's, not a tenant's: no dispatch rate limit; a queue with a worker
	// for every step that may wait at once (waiting holds the worker: nothing parks).
	if err := h.Admin(ctx, http.MethodPatch, "/api/v1/admin/org", map[string]any{"orgRpm": 0, "userRpm": 0}, nil); err != nil {
		return err
	}
	if err := h.Admin(ctx, http.MethodPut, "/api/v1/admin/queues/"+queueName, map[string]any{"class": "cpu",
		"concurrency": o.concurrency, "timeoutSeconds": 3600}, nil); err != nil {
		return err
	}
	if _, err := h.StartWith(ctx, harness.Router, harness.Spec{Env: []string{"SWITCHYARD_ROUTER_QUEUE_ORDER=" + plans[0].order}}); err != nil {
		return err
	}
	if _, err := h.Start(ctx, harness.Executor); err != nil {
		return err
	}
	b := &bench{h: h, o: o, order: plans[0].order}
	if b.providerID, err = b.simProvider(ctx); err != nil {
		return err
	}
	fmt.Printf("chainscenario: %d chains × 11 llm_only steps (1→5→1→3→1), time compressed %gx, latency %s, capacity wait %s\n",
		o.chains, o.k, o.latency, o.capWait)
	results := map[plan]result{}
	for _, pl := range plans {
		r, err := b.play(ctx, pl)
		if err != nil {
			return fmt.Errorf("%s %s %s: %w", pl.profile, pl.arrival, pl.order, err)
		}
		results[pl] = r
		fmt.Printf("%-30s %-8s round %d %-8s chains=%d mean=%6.1fs p95=%6.1fs (uncompressed) failed=%d upstream_429=%d wall=%s busy=%.0f%%\n",
			workload.Profiles[pl.profile].Name, pl.arrival, pl.round, pl.order, len(r.makespans), r.makespans.Mean(),
			r.makespans.P95(), r.failed, r.upstream429, r.wall.Round(time.Millisecond), 100*r.busy)
	}
	summarize(plans, results, o.orders)
	return nil
}

// summarize prints, per scenario and round, each order against the first (FIFO), and a
// JSON line of everything.
func summarize(plans []plan, results map[plan]result, orders []string) {
	type key struct {
		profile, arrival string
		round            int
	}
	byKey := map[key]map[string]result{}
	var keys []key
	for _, pl := range plans {
		k := key{pl.profile, pl.arrival, pl.round}
		if byKey[k] == nil {
			byKey[k] = map[string]result{}
			keys = append(keys, k)
		}
		byKey[k][pl.order] = results[pl]
	}
	var rows []map[string]any
	for _, k := range keys {
		base := byKey[k][orders[0]]
		for _, ord := range orders {
			r := byKey[k][ord]
			row := map[string]any{"profile": k.profile, "arrival": k.arrival, "round": k.round, "order": ord,
				"chains": len(r.makespans), "failed": r.failed, "mean_s": r.makespans.Mean(), "p95_s": r.makespans.P95(),
				"upstream_429": r.upstream429, "busy": r.busy}
			rows = append(rows, row)
			if ord == orders[0] {
				continue
			}
			fmt.Printf("%-30s %-8s round %d %s vs %s: mean %+.1f%%, p95 %+.1f%%\n", workload.Profiles[k.profile].Name,
				k.arrival, k.round, ord, orders[0], 100*(r.makespans.Mean()/base.makespans.Mean()-1),
				100*(r.makespans.P95()/base.makespans.P95()-1))
		}
	}
	out, _ := json.Marshal(rows)
	fmt.Println(string(out))
}

// bench is the running platform and what the runs share.
type bench struct {
	h          *harness.Harness
	o          options
	order      string // the router's current order
	providerID string // the development organisation's sim-llm provider config
}

func (b *bench) simProvider(ctx context.Context) (string, error) {
	var id string
	err := b.h.DB.QueryRow(ctx, `SELECT p.id FROM provider_configs p JOIN orgs o ON o.id = p.org_id
		WHERE o.slug = 'dev' AND p.name = 'sim-llm'`).Scan(&id)
	return id, err
}

// setOrder restarts the router with the order (nothing is in flight between runs).
func (b *bench) setOrder(ctx context.Context, order string) error {
	if order == b.order {
		return nil
	}
	if err := b.h.Stop(harness.Router, 10*time.Second); err != nil {
		return err
	}
	if _, err := b.h.StartWith(ctx, harness.Router, harness.Spec{Env: []string{"SWITCHYARD_ROUTER_QUEUE_ORDER=" + order}}); err != nil {
		return err
	}
	b.order = order
	return nil
}

// prepare gives the run its model's limits (the seed's × k per real minute) and price, and
// its skills; it returns the chain skill's job type.
func (b *bench) prepare(ctx context.Context, pl plan) (string, error) {
	p := workload.Profiles[pl.profile]
	if _, err := b.h.DB.Exec(ctx, `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm) VALUES ($1, $2, $3, $4)`,
		b.providerID, pl.tag, int(float64(p.RPM)*b.o.k), int(float64(p.TPM)*b.o.k)); err != nil {
		return "", err
	}
	if _, err := b.h.DB.Exec(ctx, `INSERT INTO prices (provider_kind, model, input_per_mtok, output_per_mtok)
		VALUES ('openai_compatible', $1, 0.1, 0.4) ON CONFLICT DO NOTHING`, pl.tag); err != nil {
		return "", err
	}
	timeout := 3600
	var steps []map[string]any
	var prev []string
	for _, stage := range workload.Pipeline {
		var names []string
		for _, ct := range stage {
			jobType := pl.tag + "_" + ct.Name
			if err := b.h.Admin(ctx, http.MethodPut, "/api/v1/skills/"+jobType, map[string]any{
				"job_type": jobType, "enabled": true, "execution_type": "llm_only", "model_override": pl.tag,
				"system_prompt": "You are the " + ct.Name + ".", "max_tokens": ct.Out, "queue": queueName,
				"timeout_seconds": timeout, "max_retries": 0,
			}, nil); err != nil {
				return "", err
			}
			step := map[string]any{"step_id": ct.Name, "job_type": jobType,
				"payload": map[string]any{"prompt": fmt.Sprintf("{{input.p%d}}", ct.Prompt)}}
			if prev != nil {
				step["depends_on"] = prev
			}
			steps = append(steps, step)
			names = append(names, ct.Name)
		}
		prev = names
	}
	chainType := pl.tag + "_chain"
	return chainType, b.h.Admin(ctx, http.MethodPut, "/api/v1/skills/"+chainType, map[string]any{
		"job_type": chainType, "enabled": true, "execution_type": "chain",
		"chain": map[string]any{"steps": steps, "timeout_seconds": timeout},
	}, nil)
}

// input is every chain's input: a prompt of each call type's size.
func input() map[string]any {
	in := map[string]any{}
	for _, stage := range workload.Pipeline {
		for _, ct := range stage {
			in[fmt.Sprintf("p%d", ct.Prompt)] = workload.Words(ct.Prompt)
		}
	}
	return in
}

// play dispatches the run's chains at their arrival times, waits until every one has
// ended and reads their makespans from Postgres.
func (b *bench) play(ctx context.Context, pl plan) (result, error) {
	var res result
	if err := b.setOrder(ctx, pl.order); err != nil {
		return res, err
	}
	jobType, err := b.prepare(ctx, pl)
	if err != nil {
		return res, err
	}
	starts, err := workload.Arrivals(pl.arrival, b.o.chains, b.o.k, b.o.seed)
	if err != nil {
		return res, err
	}
	sim0, err := routerstack.SimStats(b.h.SimURL)
	if err != nil {
		return res, err
	}
	host0, _ := hostcpu.Read()
	payload := input()
	ids := make([]string, len(starts))
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	begin := time.Now()
	for i, offset := range starts {
		wg.Go(func() {
			time.Sleep(time.Until(begin.Add(offset)))
			var out struct {
				ChainID string `json:"chainId"`
			}
			errs[i] = b.h.Admin(ctx, http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": jobType, "payload": payload}, &out)
			ids[i] = out.ChainID
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	if err := b.waitEnded(ctx, ids); err != nil {
		return res, err
	}
	res.wall = time.Since(begin)
	host1, _ := hostcpu.Read()
	res.busy = host1.Since(host0).Busy
	sim1, err := routerstack.SimStats(b.h.SimURL)
	if err != nil {
		return res, err
	}
	res.upstream429 = sim1.Refused429 - sim0.Refused429
	rows, err := b.h.DB.Query(ctx, `SELECT status, extract(epoch FROM finished_at - created_at)::float8
		FROM chains WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var secs float64
		if err := rows.Scan(&status, &secs); err != nil {
			return res, err
		}
		if status != "completed" {
			res.failed++
			continue
		}
		res.makespans = append(res.makespans, secs*b.o.k)
	}
	return res, rows.Err()
}

// waitEnded waits until every chain has ended (a 50 ms look at Postgres: the makespans
// come from the rows, so the look's period does not enter them).
func (b *bench) waitEnded(ctx context.Context, ids []string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		var open int
		if err := b.h.DB.QueryRow(ctx, `SELECT count(*) FROM chains WHERE id = ANY($1::uuid[]) AND finished_at IS NULL`,
			ids).Scan(&open); err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("chains still running after 30 minutes")
}
