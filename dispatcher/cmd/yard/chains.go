package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

func (a *app) chainCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "chain", Short: "Run and follow chains (DAGs of governed steps)"}
	cmd.AddCommand(a.chainRunCmd(), a.chainStatusCmd(), a.chainWatchCmd(), a.chainCancelCmd(),
		a.chainRerunCmd(), a.chainListCmd())
	return cmd
}

func (a *app) chainRunCmd() *cobra.Command {
	var d dispatchFlags
	var watch bool
	cmd := &cobra.Command{
		Use:   "run JOB_TYPE",
		Short: "Start a chain: dispatch a chain skill's job type",
		Long: "run dispatches JOB_TYPE, which must be bound to a chain skill, with the flags of dispatch, and\n" +
			"prints the chain id beside its parent job. With --watch it then follows the chain like\n" +
			"`yard chain watch` and exits 1 unless the chain completes.",
		Example: `  yard chain run demo_research --payload '{"topic":"tidal power"}' --watch
  yard chain run demo_research --payload-file input.json -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := a.dispatchRequest(&d, args[0])
			if err != nil {
				return err
			}
			// Refuse a job type that is not a chain before dispatching it as a plain job; an
			// unknown one is left to the dispatcher, which answers SKILL_NOT_FOUND.
			if sk, err := a.client.Skills.Get(cmd.Context(), args[0]); err == nil && sk.ExecutionType != "chain" {
				return fmt.Errorf("%s is bound to a %s skill, not a chain: use yard dispatch", args[0], sk.ExecutionType)
			}
			res, err := a.client.Dispatch(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := a.show(res, func() { a.printDispatch(res) }); err != nil {
				return err
			}
			if res.ChainID == "" {
				return fmt.Errorf("%s started no chain: it was dispatched as job %s", args[0], res.JobID)
			}
			if watch {
				return a.followChain(cmd, res.ChainID)
			}
			return nil
		},
	}
	d.bind(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the chain until it ends")
	return cmd
}

func (a *app) chainStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status CHAIN_ID",
		Short: "Show a chain: status, progress, cost and a table of its steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ch, err := a.client.Chain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.show(ch, func() { a.printChain(ch, time.Now()) })
		},
	}
}

// printChain writes a chain's summary and a table of its steps; now dates running steps.
func (a *app) printChain(ch *client.Chain, now time.Time) {
	w := a.table()
	fmt.Fprintf(w, "chain\t%s\n", ch.ChainID)
	fmt.Fprintf(w, "job\t%s (parent run)\n", ch.JobID)
	fmt.Fprintf(w, "type\t%s\n", ch.JobType)
	fmt.Fprintf(w, "status\t%s, %.0f%% done\n", ch.Status, ch.Progress*100)
	cost := fmt.Sprintf("$%.6f", ch.CostUSD)
	if ch.CostCeilingUSD != nil {
		cost += fmt.Sprintf(" of $%.6f ceiling", *ch.CostCeilingUSD)
	}
	fmt.Fprintf(w, "cost\t%s\n", cost)
	fmt.Fprintf(w, "on failure\t%s\n", ch.OnFailure)
	if ch.RerunOf != "" {
		fmt.Fprintf(w, "rerun of\t%s\n", ch.RerunOf)
	}
	fmt.Fprintf(w, "trace\t%s\n", ch.TraceID)
	fmt.Fprintf(w, "created\t%s\n", ch.CreatedAt.Local().Format(time.RFC3339))
	if ch.DeadlineAt != nil {
		fmt.Fprintf(w, "deadline\t%s\n", ch.DeadlineAt.Local().Format(time.RFC3339))
	}
	if ch.FinishedAt != nil {
		fmt.Fprintf(w, "finished\t%s (%s)\n", ch.FinishedAt.Local().Format(time.RFC3339),
			ch.FinishedAt.Sub(ch.CreatedAt).Round(time.Millisecond))
	}
	if present(ch.Error) {
		fmt.Fprintf(w, "error\t%s\n", truncate(string(ch.Error), 400))
	}
	w.Flush()

	fmt.Fprintln(a.out)
	w = a.table()
	fmt.Fprintln(w, "STEP\tINSTANCE\tSTATUS\tATTEMPT\tCOST\tDURATION\tJOB")
	for _, s := range ch.Steps {
		status := s.Status
		switch {
		case s.Reused:
			status += " (reused)"
		case s.Reason != "" && s.Reason != s.Status:
			status += " (" + s.Reason + ")"
		}
		job := s.JobID
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t$%.6f\t%s\t%s\n", s.StepID, instance(s), status, s.Attempt, s.CostUSD,
			stepDuration(s, now), job)
	}
	w.Flush()
	for _, s := range ch.Steps {
		if present(s.Error) {
			fmt.Fprintf(a.out, "%s error: %s\n", stepLabel(s.StepID, s.Instance), truncate(string(s.Error), 300))
		}
	}
}

// instance renders a step's instance column: "i of n" for an instance of a for_each step,
// "n instances" for a for_each step not fanned out (or fanned out to none), "-" otherwise.
func instance(s client.ChainStep) string {
	switch {
	case s.Instance != nil && s.Instances != nil:
		return fmt.Sprintf("%d of %d", *s.Instance, *s.Instances)
	case s.Instance != nil:
		return strconv.Itoa(*s.Instance)
	case s.Instances != nil:
		return fmt.Sprintf("%d instances", *s.Instances)
	}
	return "-"
}

// stepDuration is how long a step has taken: from its first dispatch (StartedAt) to its end,
// or to now with "…" while it is queued, held or running; "-" before it was dispatched.
func stepDuration(s client.ChainStep, now time.Time) string {
	switch {
	case s.StartedAt == nil:
		return "-"
	case s.FinishedAt != nil:
		return s.FinishedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
	}
	return now.Sub(*s.StartedAt).Round(time.Millisecond).String() + "…"
}

// stepLabel names a step, or an instance of one as step[i].
func stepLabel(stepID string, instance *int) string {
	if instance == nil {
		return stepID
	}
	return fmt.Sprintf("%s[%d]", stepID, *instance)
}

func (a *app) chainWatchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "watch CHAIN_ID",
		Short: "Follow a chain live, a line per step change, until it ends",
		Long: "watch prints a line each time a step of the chain is dispatched, starts, is held or ends, and\n" +
			"at each fork, join and progress report, from the start of the chain (the journals first, then\n" +
			"live), over the WebSocket stream or, when that is unavailable, by polling. It exits 0 when the\n" +
			"chain completes and 1 when it fails, times out or is cancelled. With -o json it prints every\n" +
			"event of every run of the chain, one envelope per line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.followChain(cmd, args[0])
		},
	}
}

// followChain prints a chain's step changes until it ends, then its final status, and turns
// an unsuccessful end into an error.
func (a *app) followChain(cmd *cobra.Command, chainID string) error {
	ctx := cmd.Context()
	// Steps already dispatched name their runs; later ones are learnt from
	// chain:step_dispatched (a step run's own events may come first: runs are not ordered
	// among themselves).
	steps := map[string]string{}
	var parent string
	if ch, err := a.client.Chain(ctx, chainID); err == nil {
		parent = ch.JobID
		for _, s := range ch.Steps {
			if s.JobID != "" {
				steps[s.JobID] = stepLabel(s.StepID, s.Instance)
			}
		}
	}
	for e, err := range a.client.WatchChain(ctx, chainID, nil) {
		if err != nil {
			return err
		}
		if a.json() {
			b, _ := json.Marshal(e)
			fmt.Fprintln(a.out, string(b))
			continue
		}
		if subject, what, detail, ok := chainLine(e, parent, steps); ok {
			fmt.Fprintf(a.out, "%s  %-20s %-16s %s\n", e.TS.Local().Format("15:04:05.000"), subject, what,
				strings.TrimSpace(detail))
		}
	}
	ch, err := a.client.Chain(ctx, chainID)
	if err != nil {
		return err
	}
	if !a.json() {
		fmt.Fprintf(a.out, "chain %s %s: %.0f%% done, $%.6f\n", ch.ChainID, ch.Status, ch.Progress*100, ch.CostUSD)
	}
	if ch.Status != client.ChainCompleted {
		return fmt.Errorf("chain %s ended: %s", chainID, ch.Status)
	}
	return nil
}

// chainLine renders one event of a chain as "subject what detail"; ok is false for events
// that change no step (spans, LLM calls, a step run's own end, which chain:step_ended
// reports with the chain's view of it).
func chainLine(e client.Event, parent string, steps map[string]string) (subject, what, detail string, ok bool) {
	if d, isChain := e.ChainData(); isChain {
		switch e.Type {
		case "chain:step_dispatched":
			label := stepLabel(d.StepID, d.Instance)
			steps[d.JobID] = label
			detail := fmt.Sprintf("attempt %d, job %s", d.Attempt, d.JobID)
			if d.Queue != "" {
				detail += ", queue " + d.Queue
			}
			return label, d.Status, detail, true
		case "chain:step_ended":
			detail := fmt.Sprintf("$%.6f", d.CostUSD)
			if d.Reason != "" {
				detail += " " + truncate(d.Reason, 80)
			}
			if present(d.Error) {
				detail += " " + truncate(errorText(d.Error), 100)
			}
			return stepLabel(d.StepID, d.Instance), d.Status, detail, true
		case "chain:fork":
			return d.Trigger, "fork", "→ " + strings.Join(d.Forked, ", "), true
		case "chain:join":
			return d.JoinStepID, "join", "← " + strings.Join(d.CompletedPredecessors, ", "), true
		case "chain:progress":
			return "chain", "progress", fmt.Sprintf("%.0f%% (%d of %d steps), $%.6f", d.Progress*100, d.Completed,
				d.Total, d.CostUSD), true
		}
		return "chain", e.Type, truncate(string(e.Data), 100), true
	}
	if e.JobID == parent {
		if e.Terminal() {
			return "chain", strings.TrimPrefix(e.Type, "job:"), "", true
		}
		return "", "", "", false
	}
	label, known := steps[e.JobID]
	if !known {
		label = "job " + e.JobID
	}
	switch e.Type {
	case "job:started":
		return label, "running", "", true
	case "job:held":
		return label, "pending_review", truncate(string(e.Data), 100), true
	case "job:approved":
		return label, "approved", "", true
	case "job:retrying", "job:waiting":
		return label, strings.TrimPrefix(e.Type, "job:"), truncate(string(e.Data), 100), true
	}
	return "", "", "", false
}

// errorText is a run error's message, or the error as JSON when it has none.
func errorText(raw json.RawMessage) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return strings.TrimSpace(e.Code + ": " + e.Message)
	}
	return string(raw)
}

func (a *app) chainCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel CHAIN_ID",
		Short: "Cancel a running chain: its queued, held and running steps, and those not yet started",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client.CancelChain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.show(res, func() { fmt.Fprintf(a.out, "%s %s\n", res.ChainID, res.Status) })
		},
	}
}

func (a *app) chainRerunCmd() *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "rerun CHAIN_ID",
		Short: "Start a new chain that reuses the outputs of an ended chain's completed steps",
		Long: "rerun starts a new chain from an ended one: completed steps keep their outputs, failed,\n" +
			"cancelled and skipped ones run again. It prints the new chain; with --watch it follows it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client.RerunChain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			err = a.show(res, func() {
				reused := "none"
				if len(res.Reused) > 0 {
					reused = strings.Join(res.Reused, ", ")
				}
				w := a.table()
				fmt.Fprintf(w, "chain\t%s (rerun of %s)\n", res.ChainID, res.RerunOf)
				fmt.Fprintf(w, "job\t%s (parent run)\n", res.JobID)
				fmt.Fprintf(w, "status\t%s\n", res.Status)
				fmt.Fprintf(w, "reused\t%s\n", reused)
				w.Flush()
			})
			if err != nil {
				return err
			}
			if watch {
				return a.followChain(cmd, res.ChainID)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the new chain until it ends")
	return cmd
}

func (a *app) chainListCmd() *cobra.Command {
	var opts client.ChainListOptions
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List chains, newest first",
		Example: `  yard chain list --status running
  yard chain list --job-type demo_research --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			chains, next, err := collect(all, a.client.ListAllChains(cmd.Context(), opts), func() ([]client.ChainSummary, string, error) {
				page, err := a.client.ListChains(cmd.Context(), opts)
				return page.Items, page.NextCursor, err
			})
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(client.ChainList{Items: orEmpty(chains), NextCursor: next})
			}
			w := a.table()
			fmt.Fprintln(w, "CHAIN\tTYPE\tSTATUS\tPROGRESS\tSTEPS\tCOST\tCREATED\tRERUN OF")
			for _, c := range chains {
				rerunOf := c.RerunOf
				if rerunOf == "" {
					rerunOf = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%.0f%%\t%d\t$%.6f\t%s\t%s\n", c.ChainID, c.JobType, c.Status, c.Progress*100,
					c.Steps, c.CostUSD, c.CreatedAt.Local().Format(time.RFC3339), rerunOf)
			}
			return a.flushPage(w, next)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Status, "status", "", "only chains in this status (running, completed, failed, cancelled, timed_out)")
	f.StringVar(&opts.JobType, "job-type", "", "only chains of this job type")
	pageFlags(cmd, &opts.Limit, &opts.Cursor, &all)
	return cmd
}
