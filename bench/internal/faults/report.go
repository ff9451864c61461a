package faults

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// Report is one fault's outcome.
type Report struct {
	Fault, What string
	// Dispatched is every dispatch the load started; Accepted got a 202 (or the 200 of a
	// repeated idempotency key); NotAccepted were still refused after DispatchTimeout,
	// with their last error in NotAcceptedWhy.
	Dispatched, Accepted, NotAccepted int
	NotAcceptedWhy                    map[string]int
	// Completed ended completed*, Failed in any other terminal status (by error code in
	// FailedCodes).
	Completed, Failed int
	FailedCodes       map[string]int
	// Lost are accepted runs that had not ended when the window closed, or that Postgres
	// does not know (as "id (status)").
	Lost []string

	// Served is the provider calls sim-llm answered (and a provider would bill).
	Served int64
	// DupProvider is answers served beyond the first of the same request: calls paid
	// twice. DupProviderJobs names the jobs (tag → job id). DupCutOff is those of them
	// whose job has a call cut off by a router's death (a usage-ledger row of outcome
	// unknown): the provider answered a router that died before it read the answer, so
	// the retry had to ask again — paid twice, and recorded; only a provider honouring an
	// idempotency key could prevent it (docs/faults.md).
	DupProvider     int64
	DupProviderJobs []string
	DupCutOff       int64
	// LLMCalls is the runs' own count of journaled LLM calls.
	LLMCalls int64
	// LedgerRows is the usage-ledger rows of the phase's runs with an answer; LedgerUnknown
	// those of calls cut off by a router's death (outcome unknown: paid or not, no one
	// knows but the provider). LedgerMissing is the calls served without a row: served
	// minus the answered rows minus the cut-off calls the provider did serve (DupCutOff);
	// LedgerExtra the answered rows beyond the calls served.
	LedgerRows, LedgerUnknown, LedgerMissing, LedgerExtra int64
	// CountersOff is the (organisation, month) pairs whose monthly counters
	// (org_monthly_usage: the token quota's and the cost budget's) disagree with the sum of
	// their ledger rows: a row counted twice or not at all.
	CountersOff int

	// ToolRequests and ToolExecutions are create_ticket requests and tickets created;
	// ToolResent the requests that repeated a key (answered from the first ticket, no
	// second effect); ToolWithoutKey the requests with no key; DupTool the tickets created
	// beyond the first for the same body (the side effect done twice).
	ToolRequests, ToolExecutions, ToolResent, ToolWithoutKey, DupTool int
	// ToolUnknown is side-effecting calls whose outcome the platform never recorded
	// (tool-call ledger rows still "started").
	ToolUnknown int

	// Chains is the accepted chains (demo_research, and content-pipeline workflows);
	// ChainSteps their step runs;
	// DupSteps the steps of theirs that completed more than once (dispatched twice).
	Chains, ChainSteps, DupSteps int

	// Recover is fault → first completion of a run accepted after the fault; Drain is
	// fault → every run accepted before the recovery has ended. -1: never.
	Recover, Drain time.Duration
}

// OK is what the suite promises: nothing lost, nothing paid or done twice, every provider
// call in the ledger once. Failed runs and slow recoveries are reported, not judged: a
// run may fail (and say why) when a fault outlasts its retries.
func (r Report) OK() bool {
	return len(r.Lost) == 0 && r.DupProvider == r.DupCutOff && r.DupTool == 0 && r.LedgerMissing == 0 &&
		r.LedgerExtra == 0 && r.DupSteps == 0 && r.CountersOff == 0
}

type simStats struct {
	Total struct {
		Served   int64 `json:"served"`
		InFlight int64 `json:"in_flight"`
	} `json:"total"`
}

type simRepeats struct {
	Tracking bool  `json:"tracking"`
	Extra    int64 `json:"extra"`
	Repeated []struct {
		Served    int64  `json:"served"`
		FirstUser string `json:"first_user"`
	} `json:"repeated"`
}

type toolStats struct {
	Tickets       int `json:"tickets"`
	Executions    int `json:"executions"`
	Duplicates    int `json:"duplicates"`
	WithoutKey    int `json:"without_key"`
	ExecutedTwice []struct {
		Executions int `json:"executions"`
	} `json:"executed_twice"`
}

// account counts the phase once the runs have ended (or the window closed).
func (ph *phase) account(ctx context.Context, runs map[string]runState) (Report, error) {
	r := Report{Fault: ph.f.Name, What: ph.f.What, NotAcceptedWhy: map[string]int{}, FailedCodes: map[string]int{}}
	byTag := map[string]string{}
	var ids []string
	for _, j := range ph.jobs {
		r.Dispatched++
		if j.id == "" {
			r.NotAccepted++
			r.NotAcceptedWhy[j.lastErr]++
			continue
		}
		r.Accepted++
		ids = append(ids, j.id)
		byTag[j.tag] = j.id
		st, ok := runs[j.id]
		switch {
		case !ok:
			r.Lost = append(r.Lost, j.id+" (missing)")
		case !terminal[st.status]:
			r.Lost = append(r.Lost, j.id+" ("+st.status+")")
		case completed(st.status):
			r.Completed++
		default:
			r.Failed++
			r.FailedCodes[st.status+" "+st.code]++
		}
		r.LLMCalls += st.llmCalls
	}

	// A chain's provider calls are its steps' runs': count them with the phase's runs.
	steps, err := ph.chainSteps(ctx, ids)
	if err != nil {
		return r, err
	}
	r.ChainSteps = len(steps)
	for _, j := range ph.jobs {
		if j.id != "" && (j.kind == "demo_research" || j.kind == "content-pipeline") {
			r.Chains++
		}
	}
	ids = append(ids, steps...)
	if err := ph.p.DB.QueryRow(ctx, `SELECT count(*) FROM (SELECT r.chain_id, r.chain_step FROM runs r
		JOIN runs p ON p.chain_id = r.chain_id AND p.chain_step IS NULL
		WHERE p.id = ANY($1::uuid[]) AND r.chain_step IS NOT NULL
		GROUP BY r.chain_id, r.chain_step HAVING count(*) FILTER (WHERE r.status LIKE 'completed%') > 1) x`,
		ids).Scan(&r.DupSteps); err != nil {
		return r, fmt.Errorf("counting chain steps run twice: %w", err)
	}

	// Calls still in flight at the simulator (a router finishing a call whose caller
	// went away) are counted once they are answered.
	var sim simStats
	if err := ph.poll(ctx, 30*time.Second, func() (bool, error) {
		err := harness.JSON(ctx, http.MethodGet, ph.p.SimURL+"/sim/stats", nil, nil, &sim)
		return err == nil && sim.Total.InFlight == 0, err
	}); err != nil {
		return r, fmt.Errorf("waiting for sim-llm to be idle: %w", err)
	}
	r.Served = sim.Total.Served
	var rep simRepeats
	if err := harness.JSON(ctx, http.MethodGet, ph.p.SimURL+"/sim/repeats", nil, nil, &rep); err != nil {
		return r, err
	}
	if !rep.Tracking {
		return r, fmt.Errorf("sim-llm does not track repeats: start it with --track-repeats")
	}
	r.DupProvider = rep.Extra

	// The ledger is written off the request path: wait (bounded) for it to catch up.
	if err := ph.poll(ctx, ph.cfg.LedgerWait, func() (bool, error) {
		err := ph.p.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'answered'),
			count(*) FILTER (WHERE outcome = 'unknown') FROM usage_ledger WHERE run_id = ANY($1::uuid[])`, ids).
			Scan(&r.LedgerRows, &r.LedgerUnknown)
		return err == nil && r.LedgerRows+r.LedgerUnknown >= r.Served, err
	}); err != nil {
		return r, fmt.Errorf("counting the usage ledger: %w", err)
	}
	cutOff, err := ph.cutOffByJob(ctx, ids)
	if err != nil {
		return r, err
	}
	for _, x := range rep.Repeated {
		tag := tagIn(x.FirstUser, byTag)
		job := byTag[tag]
		explained := min(x.Served-1, cutOff[job])
		cutOff[job] -= explained
		r.DupCutOff += explained
		note := ""
		if explained > 0 {
			note = " (cut off)"
		}
		r.DupProviderJobs = append(r.DupProviderJobs, fmt.Sprintf("%s %s ×%d%s", job, tag, x.Served, note))
	}
	r.LedgerMissing = max(0, r.Served-r.LedgerRows-r.DupCutOff)
	r.LedgerExtra = max(0, r.LedgerRows-r.Served)
	if err := ph.p.DB.QueryRow(ctx, `SELECT count(*) FROM (
			SELECT org_id, date_trunc('month', created_at AT TIME ZONE 'UTC')::date AS month,
				sum(tokens_in + tokens_out) AS tokens, sum(cost_usd) AS cost
			FROM usage_ledger GROUP BY 1, 2) l
		FULL JOIN org_monthly_usage o ON o.org_id = l.org_id AND o.month = l.month
		WHERE coalesce(l.tokens, 0) <> coalesce(o.tokens, 0) OR coalesce(l.cost, 0) <> coalesce(o.cost_usd, 0)`).
		Scan(&r.CountersOff); err != nil {
		return r, fmt.Errorf("checking the monthly counters against the ledger: %w", err)
	}

	var tool toolStats
	if err := harness.JSON(ctx, http.MethodGet, ph.p.ToolURL+"/stats", nil, nil, &tool); err != nil {
		return r, err
	}
	r.ToolRequests, r.ToolExecutions, r.ToolResent, r.ToolWithoutKey = tool.Tickets, tool.Executions, tool.Duplicates, tool.WithoutKey
	for _, e := range tool.ExecutedTwice {
		r.DupTool += e.Executions - 1
	}
	if err := ph.p.DB.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE run_id = ANY($1::uuid[]) AND status = 'started'`,
		ids).Scan(&r.ToolUnknown); err != nil {
		return r, fmt.Errorf("reading the tool-call ledger: %w", err)
	}
	slices.Sort(r.Lost)
	slices.Sort(r.DupProviderJobs)
	return r, nil
}

// tagIn finds the load's tag in a prompt: it starts a job's prompt, and is a word of each
// of a chain step's ("Analyse the market for <tag>."). "" when there is none.
func tagIn(prompt string, byTag map[string]string) string {
	for _, w := range strings.Fields(prompt) {
		if w = strings.TrimRight(w, ".,;:!?\"'"); byTag[w] != "" {
			return w
		}
	}
	return ""
}

// cutOffByJob counts, per job of the load (a chain step's calls count for its chain's
// parent run, whose tag its prompt carries), the usage-ledger rows of calls cut off by a
// router's death (outcome unknown) among the runs ids.
func (ph *phase) cutOffByJob(ctx context.Context, ids []string) (map[string]int64, error) {
	rows, err := ph.p.DB.Query(ctx, `SELECT coalesce(p.id, u.run_id)::text, count(*) FROM usage_ledger u
		LEFT JOIN runs p ON u.chain_id IS NOT NULL AND p.chain_id = u.chain_id AND p.chain_step IS NULL
		WHERE u.run_id = ANY($1::uuid[]) AND u.outcome = 'unknown' GROUP BY 1`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the calls cut off: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var job string
		var n int64
		if err := rows.Scan(&job, &n); err != nil {
			return nil, err
		}
		out[job] = n
	}
	return out, rows.Err()
}

// chainSteps returns the step runs of the chains whose parent runs are among ids.
func (ph *phase) chainSteps(ctx context.Context, ids []string) ([]string, error) {
	rows, err := ph.p.DB.Query(ctx, `SELECT r.id::text FROM runs r JOIN runs p ON p.chain_id = r.chain_id
		WHERE p.id = ANY($1::uuid[]) AND p.chain_step IS NULL AND r.chain_step IS NOT NULL`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading chain steps: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// poll calls cond every 100 ms until it holds or limit has passed; the last error (or
// none) is returned when it never held — except that a condition that merely never held
// without error is not an error: the caller reports what it read.
func (ph *phase) poll(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// Print writes the table of reports and, under it, the details of every figure that is
// not what it should be.
func Print(w io.Writer, reports []Report) {
	fmt.Fprintf(w, "%-16s %8s %9s %6s %4s %7s %7s %8s %8s %14s %12s %8s %8s\n", "fault", "accepted", "completed", "failed",
		"lost", "dup-llm", "cut-off", "dup-tool", "dup-step", "ledger-missing", "ledger-extra", "recover", "drain")
	for _, r := range reports {
		fmt.Fprintf(w, "%-16s %8d %9d %6d %4d %7d %7d %8d %8d %14d %12d %8s %8s\n", r.Fault, r.Accepted, r.Completed, r.Failed,
			len(r.Lost), r.DupProvider, r.LedgerUnknown, r.DupTool, r.DupSteps, r.LedgerMissing, r.LedgerExtra, ms(r.Recover), ms(r.Drain))
	}
	for _, r := range reports {
		var lines []string
		add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
		if r.NotAccepted > 0 {
			add("not accepted within the dispatch timeout: %d (last errors: %s)", r.NotAccepted, counts(r.NotAcceptedWhy))
		}
		if r.Failed > 0 {
			add("failed: %s", counts(r.FailedCodes))
		}
		if len(r.Lost) > 0 {
			add("lost (accepted, never ended): %s", list(r.Lost))
		}
		if r.DupProvider > 0 {
			add("provider calls paid twice: %d, of jobs %s", r.DupProvider, list(r.DupProviderJobs))
		}
		if r.LedgerUnknown > 0 {
			add("calls cut off by the router's death: %d, recorded with outcome unknown; %d of them answered by the "+
				"provider to no one and asked again by the retry (paid twice: the provider takes no idempotency key)",
				r.LedgerUnknown, r.DupCutOff)
		}
		if r.LedgerMissing > 0 || r.LedgerExtra > 0 {
			add("usage ledger: %d answered rows and %d cut off for %d calls served (runs count %d journaled calls)",
				r.LedgerRows, r.LedgerUnknown, r.Served, r.LLMCalls)
		}
		if r.CountersOff > 0 {
			add("monthly counters (org_monthly_usage) off the sum of their ledger rows: %d organisation-months", r.CountersOff)
		}
		if r.DupTool > 0 || r.ToolResent > 0 || r.ToolWithoutKey > 0 || r.ToolUnknown > 0 {
			add("create_ticket: %d requests, %d tickets created, %d created twice, %d re-sent keys, %d without a key, "+
				"%d outcomes never recorded", r.ToolRequests, r.ToolExecutions, r.DupTool, r.ToolResent, r.ToolWithoutKey, r.ToolUnknown)
		}
		if r.Chains > 0 {
			add("chains: %d accepted (counted above by their parent runs), %d step runs, %d steps completed twice",
				r.Chains, r.ChainSteps, r.DupSteps)
		}
		if r.Recover < 0 {
			add("no run accepted after the fault completed")
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s — %s\n", r.Fault, r.What)
			for _, l := range lines {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// list shows the first ten items and how many more there are.
func list(items []string) string {
	if len(items) <= 10 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:10], ", ") + fmt.Sprintf(", and %d more", len(items)-10)
}
