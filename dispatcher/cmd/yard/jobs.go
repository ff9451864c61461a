package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

func (a *app) dispatchCmd() *cobra.Command {
	var d dispatchFlags
	var watch bool
	cmd := &cobra.Command{
		Use:   "dispatch JOB_TYPE",
		Short: "Dispatch one job",
		Example: `  yard dispatch demo_llm --prompt "Say hello"
  yard dispatch demo_llm --payload '{"messages":[{"role":"user","content":"Hi"}]}' --priority high --watch
  echo '{"prompt":"hi"}' | yard dispatch demo_llm --payload-file -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := a.dispatchRequest(&d, args[0])
			if err != nil {
				return err
			}
			res, err := a.client.Dispatch(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := a.show(res, func() { a.printDispatch(res) }); err != nil {
				return err
			}
			if watch {
				return a.follow(cmd, res.JobID, 0)
			}
			return nil
		},
	}
	d.bind(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the job's events until it ends")
	return cmd
}

// dispatchFlags are the flags that make a dispatch body, shared by dispatch and chain run.
type dispatchFlags struct {
	req                                    client.DispatchRequest
	md                                     client.Metadata
	payload, payloadFile, prompt, priority string
}

func (d *dispatchFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&d.payload, "payload", "", "payload as a JSON object")
	f.StringVar(&d.payloadFile, "payload-file", "", "file holding the payload JSON object (- for stdin)")
	f.StringVar(&d.prompt, "prompt", "", `shorthand for --payload '{"prompt": "..."}'`)
	f.StringVar(&d.req.UserID, "user", "", "end user the job is for (per-user rate limits)")
	f.StringVar(&d.priority, "priority", "", "critical, high, normal (default) or low")
	f.StringVar(&d.req.CallbackURL, "callback-url", "", "URL that receives a signed POST when the job ends")
	f.StringVar(&d.req.IdempotencyKey, "idempotency-key", "", "repeat-safe key: a repeat returns the original job")
	f.StringVar(&d.md.SourceService, "source-service", "", "metadata.source_service")
	f.StringVar(&d.md.CorrelationID, "correlation-id", "", "metadata.correlation_id")
	f.StringVar(&d.md.ParentJobID, "parent-job-id", "", "metadata.parent_job_id")
	cmd.MarkFlagsMutuallyExclusive("payload", "payload-file", "prompt")
}

// dispatchRequest builds the dispatch body of jobType from the flags.
func (a *app) dispatchRequest(d *dispatchFlags, jobType string) (client.DispatchRequest, error) {
	raw, err := a.payload(d.payload, d.payloadFile, d.prompt)
	if err != nil {
		return client.DispatchRequest{}, err
	}
	req := d.req
	req.JobType, req.Payload, req.Priority = jobType, raw, client.Priority(d.priority)
	if d.md != (client.Metadata{}) {
		md := d.md
		req.Metadata = &md
	}
	return req, nil
}

// payload returns the job payload from exactly one of the three flags.
func (a *app) payload(inline, file, prompt string) (json.RawMessage, error) {
	var raw []byte
	switch {
	case prompt != "":
		return json.Marshal(map[string]string{"prompt": prompt})
	case inline != "":
		raw = []byte(inline)
	case file != "":
		var err error
		if raw, err = a.readFile(file); err != nil {
			return nil, err
		}
	default:
		return nil, usageError{errors.New("give the payload with --payload, --payload-file or --prompt")}
	}
	if !json.Valid(raw) {
		return nil, usageError{errors.New("the payload is not valid JSON")}
	}
	return bytes.TrimSpace(raw), nil
}

// readFile reads a file, or stdin for "-".
func (a *app) readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(a.in)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}

func (a *app) printDispatch(res client.DispatchResult) {
	w := a.table()
	verb := "accepted"
	if res.Duplicate {
		verb = "duplicate of an earlier dispatch"
	}
	fmt.Fprintf(w, "job\t%s (%s)\n", res.JobID, verb)
	if res.ChainID != "" {
		fmt.Fprintf(w, "chain\t%s (the job is its parent run)\n", res.ChainID)
	}
	fmt.Fprintf(w, "status\t%s\n", res.Status)
	fmt.Fprintf(w, "queue\t%s (%d consumers, position %d)\n", res.Queue, res.Consumers, res.EstimatedPosition)
	fmt.Fprintf(w, "trace\t%s\n", res.TraceID)
	if res.AuditFlagged {
		fmt.Fprintf(w, "audit\tflagged\n")
	}
	for _, h := range res.HoldReasons {
		fmt.Fprintf(w, "held\t%s\n", holdReason(h))
	}
	w.Flush()
}

// holdReason renders "check: detector at path — message", leaving out what is unset.
func holdReason(h client.HoldReason) string {
	var b strings.Builder
	if h.Check != "" {
		b.WriteString(h.Check + ": ")
	}
	b.WriteString(h.Detector)
	if h.Path != "" {
		b.WriteString(" at " + h.Path)
	}
	if h.Message != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), ": ") {
			b.WriteString(" — ")
		}
		b.WriteString(h.Message)
	}
	if b.Len() == 0 {
		return string(h.Raw)
	}
	return b.String()
}

func (a *app) batchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "batch FILE",
		Short: "Dispatch up to 500 jobs from a JSON or JSONL file (- for stdin)",
		Long: "FILE holds dispatch bodies as a JSON array, as {\"items\": [...]}, or one JSON object per line (JSONL).\n" +
			"Each item is answered on its own; yard exits 1 when any item was refused.",
		Example: `  yard batch jobs.jsonl
  yard batch - -o json < jobs.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := a.readFile(args[0])
			if err != nil {
				return err
			}
			items, err := parseBatch(raw)
			if err != nil {
				return usageError{err}
			}
			res, err := a.client.DispatchBatch(cmd.Context(), items)
			if err != nil {
				return err
			}
			refused := 0
			for _, it := range res.Items {
				if it.Error != nil {
					refused++
				}
			}
			if a.json() {
				if err := a.emit(res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.out, "batch %s: %d accepted, %d refused\n", res.BatchID, len(res.Items)-refused, refused)
				w := a.table()
				fmt.Fprintln(w, "#\tHTTP\tJOB / ERROR\tSTATUS")
				for _, it := range res.Items {
					switch {
					case it.Error != nil:
						fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", it.Index, it.Status, it.Error.Code, truncate(it.Error.Message, 60))
					case it.Result != nil:
						fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", it.Index, it.Status, it.Result.JobID, it.Result.Status)
					}
				}
				w.Flush()
			}
			if refused > 0 {
				return fmt.Errorf("%d of %d items were refused", refused, len(res.Items))
			}
			return nil
		},
	}
}

// parseBatch reads a JSON array, an {"items": [...]} object or JSONL.
func parseBatch(raw []byte) ([]client.DispatchRequest, error) {
	raw = bytes.TrimSpace(raw)
	var items []json.RawMessage
	switch {
	case len(raw) == 0:
		return nil, errors.New("the batch file is empty")
	case raw[0] == '[':
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("reading the batch array: %w", err)
		}
	default:
		var wrapped struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &wrapped); err == nil && wrapped.Items != nil {
			items = wrapped.Items
			break
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			if !json.Valid(line) {
				return nil, fmt.Errorf("line %d is not valid JSON", n)
			}
			items = append(items, append(json.RawMessage(nil), line...))
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading JSONL: %w", err)
		}
	}
	out := make([]client.DispatchRequest, len(items))
	for i, it := range items {
		// Decoded leniently here; the dispatcher validates each item strictly and answers
		// every bad field.
		var body struct {
			client.DispatchRequest
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(it, &body); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = body.DispatchRequest
		if body.Payload != nil {
			out[i].Payload = body.Payload
		}
	}
	return out, nil
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status JOB_ID",
		Short: "Show a job: status, timings, billing, output or error",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(r)
			}
			w := a.table()
			fmt.Fprintf(w, "job\t%s\n", r.JobID)
			fmt.Fprintf(w, "type\t%s (skill v%d, %s)\n", r.JobType, r.SkillVersion, r.ExecutionType)
			fmt.Fprintf(w, "status\t%s\n", r.Status)
			fmt.Fprintf(w, "queue\t%s, priority %s, attempts %d\n", r.Queue, r.Priority, r.Attempts)
			fmt.Fprintf(w, "trace\t%s\n", r.TraceID)
			if r.UserID != "" {
				fmt.Fprintf(w, "user\t%s\n", r.UserID)
			}
			fmt.Fprintf(w, "created\t%s\n", r.Timings.CreatedAt.Local().Format(time.RFC3339))
			if d := r.Timings.QueueWaitMS; d != nil {
				fmt.Fprintf(w, "queue wait\t%.1f ms\n", *d)
			}
			if d := r.Timings.DurationMS; d != nil {
				fmt.Fprintf(w, "duration\t%.1f ms\n", *d)
			}
			if b := r.Billing; b.LLMCalls > 0 || b.CostUSD > 0 {
				fmt.Fprintf(w, "billing\t%d LLM calls, %d in / %d out tokens, $%.6f\n", b.LLMCalls, b.TokensIn, b.TokensOut, b.CostUSD)
			}
			if r.AuditFlagged {
				fmt.Fprintf(w, "audit\tflagged\n")
			}
			for _, h := range r.HoldReasons {
				fmt.Fprintf(w, "held\t%s\n", holdReason(h))
			}
			if present(r.Output) {
				fmt.Fprintf(w, "output\t%s\n", truncate(string(r.Output), 400))
			}
			if present(r.Error) {
				fmt.Fprintf(w, "error\t%s\n", truncate(string(r.Error), 400))
			}
			return w.Flush()
		},
	}
}

// present reports whether a JSON value is set (not absent, null, {} or []).
func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}" && s != "[]"
}

func (a *app) listCmd() *cobra.Command {
	var opts client.ListOptions
	var status, since, until string
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Example: `  yard list --status held_for_review
  yard list --job-type demo_llm --since 2026-01-01T00:00:00Z --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Status = client.Status(status)
			var err error
			if opts.Since, err = parseTime("since", since); err != nil {
				return err
			}
			if opts.Until, err = parseTime("until", until); err != nil {
				return err
			}
			runs, next, err := collect(all, a.client.ListAll(cmd.Context(), opts), func() ([]client.Run, string, error) {
				page, err := a.client.List(cmd.Context(), opts)
				return page.Items, page.NextCursor, err
			})
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(client.RunPage{Items: orEmpty(runs), NextCursor: next})
			}
			w := a.table()
			fmt.Fprintln(w, "JOB\tTYPE\tSTATUS\tQUEUE\tPRIORITY\tCREATED")
			for _, r := range runs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.JobID, r.JobType, r.Status, r.Queue, r.Priority,
					r.Timings.CreatedAt.Local().Format(time.RFC3339))
			}
			return a.flushPage(w, next)
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only jobs in this status")
	f.StringVar(&opts.JobType, "job-type", "", "only jobs of this type")
	f.StringVar(&opts.Queue, "queue", "", "only jobs of this queue")
	f.StringVar(&since, "since", "", "only jobs created at or after this RFC 3339 time")
	f.StringVar(&until, "until", "", "only jobs created before this RFC 3339 time")
	pageFlags(cmd, &opts.Limit, &opts.Cursor, &all)
	return cmd
}

// pageFlags binds the paging flags of a list command.
func pageFlags(cmd *cobra.Command, limit *int, cursor *string, all *bool) {
	f := cmd.Flags()
	f.IntVar(limit, "limit", 0, "page size (dispatcher default 50)")
	f.StringVar(cursor, "cursor", "", "continue from a previous page")
	f.BoolVar(all, "all", false, "fetch every page")
}

// flushPage flushes a list's table and says how to get the next page, if any.
func (a *app) flushPage(w *tabwriter.Writer, next string) error {
	if err := w.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(a.out, "more: --cursor %s (or --all)\n", next)
	}
	return nil
}

// collect returns the items of a listing: with all, every page (from each), else the first
// page (from page) and the cursor of the next.
func collect[T any](all bool, each iter.Seq2[T, error], page func() ([]T, string, error)) ([]T, string, error) {
	if !all {
		return page()
	}
	var items []T
	for it, err := range each {
		if err != nil {
			return nil, "", err
		}
		items = append(items, it)
	}
	return items, "", nil
}

func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z", flag)}
	}
	return t, nil
}

func (a *app) spansCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "spans JOB_ID",
		Short: "Print a job's execution span tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client.Spans(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(s)
			}
			fmt.Fprintf(a.out, "job %s (%s), trace %s\n", s.JobID, s.Status, s.TraceID)
			for i, n := range s.Tree {
				printSpan(a.out, n, "", i == len(s.Tree)-1)
			}
			return nil
		},
	}
}

// printSpan draws one node of the tree and its children with box-drawing prefixes.
func printSpan(w io.Writer, n *client.SpanNode, indent string, last bool) {
	branch, next := "├─ ", "│  "
	if last {
		branch, next = "└─ ", "   "
	}
	line := fmt.Sprintf("%s%s%s %s [%s]", indent, branch, n.Type, n.Name, n.Status)
	if n.Attempt > 0 {
		// Which attempt of the run made the span: a resumed run shows both.
		line += fmt.Sprintf(" attempt %d", n.Attempt)
	}
	if n.DurationMS != nil {
		line += fmt.Sprintf(" %.1fms", *n.DurationMS)
	}
	if b := n.Billing; b != nil {
		line += fmt.Sprintf(" %s/%s %d→%d tok $%.6f", b.Provider, b.Model, b.TokensIn, b.TokensOut, b.CostUSD)
	}
	fmt.Fprintln(w, line)
	for i, c := range n.Children {
		printSpan(w, c, indent+next, i == len(n.Children)-1)
	}
}

func (a *app) watchCmd() *cobra.Command {
	var after int64
	cmd := &cobra.Command{
		Use:   "watch JOB_ID",
		Short: "Follow a job's events until it ends",
		Long: "watch prints the job's events from --after on (the journal first, then live), over the\n" +
			"WebSocket stream or, when that is unavailable, by polling. It exits 0 when the job completes\n" +
			"and 1 when it fails, times out, is cancelled or rejected.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.follow(cmd, args[0], after)
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "start after this event seq")
	return cmd
}

// follow prints events until the terminal one and turns an unsuccessful end into an error.
func (a *app) follow(cmd *cobra.Command, jobID string, after int64) error {
	var last client.Event
	for e, err := range a.client.Watch(cmd.Context(), jobID, after) {
		if err != nil {
			return err
		}
		last = e
		if a.json() {
			// One envelope per line, as the stream sends them.
			b, _ := json.Marshal(e)
			fmt.Fprintln(a.out, string(b))
			continue
		}
		fmt.Fprintf(a.out, "%4d  %s  %-18s %s\n", e.Seq, e.TS.Local().Format("15:04:05.000"), e.Type, eventSummary(e))
	}
	switch last.Type {
	case "", "job:completed":
		return nil
	}
	return fmt.Errorf("job %s ended: %s", jobID, last.Type)
}

// eventSummary is a one-line view of an event's data.
func eventSummary(e client.Event) string {
	var m map[string]any
	if json.Unmarshal(e.Data, &m) != nil {
		return truncate(string(e.Data), 100)
	}
	if e.Type == "job:span" {
		return fmt.Sprintf("%v %v [%v]", m["type"], m["name"], m["status"])
	}
	return truncate(string(e.Data), 100)
}

func (a *app) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a queued, held or running job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client.Cancel(cmd.Context(), args[0])
			return a.printStatus(res, err)
		},
	}
}

func (a *app) approveCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "approve JOB_ID",
		Short: "Approve a held or pending-review job (role approve)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client.Approve(cmd.Context(), args[0], reason)
			return a.printStatus(res, err)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the reviewer)")
	return cmd
}

func (a *app) rejectCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "reject JOB_ID --reason TEXT",
		Short: "Reject a held or pending-review job (role approve)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client.Reject(cmd.Context(), args[0], reason)
			return a.printStatus(res, err)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required, recorded with the reviewer)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (a *app) printStatus(res client.StatusAnswer, err error) error {
	if err != nil {
		return err
	}
	if a.json() {
		return a.emit(res)
	}
	fmt.Fprintf(a.out, "%s %s\n", res.JobID, res.Status)
	return nil
}

func (a *app) reviewsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reviews",
		Short: "List jobs waiting for a reviewer (role approve)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := a.client.Reviews(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(rs))
			}
			w := a.table()
			fmt.Fprintln(w, "JOB\tTYPE\tSTATUS\tREASONS")
			for _, r := range rs {
				reasons := make([]string, len(r.HoldReasons))
				for i, h := range r.HoldReasons {
					reasons[i] = holdReason(h)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.JobID, r.JobType, r.Status, strings.Join(reasons, "; "))
			}
			return w.Flush()
		},
	}
}
