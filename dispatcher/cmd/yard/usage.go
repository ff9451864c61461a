package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

// periodFlags are the flags of a usage report's or an audit export's period.
type periodFlags struct {
	month, from, to string
	pseudonymise    bool
	out             string
}

func (p *periodFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.month, "month", "", "calendar month YYYY-MM (default: the current month)")
	f.StringVar(&p.from, "from", "", "start, RFC 3339 or YYYY-MM-DD (midnight UTC); default the start of the current month")
	f.StringVar(&p.to, "to", "", "end (exclusive), RFC 3339 or YYYY-MM-DD; default now")
	f.BoolVar(&p.pseudonymise, "pseudonymise", false, "replace user ids with the organisation's keyed pseudonyms")
	f.StringVar(&p.out, "out", "", "write to this file instead of standard output")
}

func (p *periodFlags) query() (client.UsageQuery, error) {
	q := client.UsageQuery{Month: p.month, Pseudonymise: p.pseudonymise}
	var err error
	if q.From, err = parseDay("from", p.from); err != nil {
		return q, err
	}
	q.To, err = parseDay("to", p.to)
	return q, err
}

// parseDay reads an RFC 3339 time or a date (its midnight UTC).
func parseDay(flag, v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return parseTime(flag, v)
}

// output opens --out (or standard output) and returns a function that closes it.
func (p *periodFlags) output(a *app) (io.Writer, func() error, error) {
	if p.out == "" || p.out == "-" {
		return a.out, func() error { return nil }, nil
	}
	f, err := os.Create(p.out)
	if err != nil {
		return nil, nil, fmt.Errorf("creating --out: %w", err)
	}
	return f, f.Close, nil
}

func (a *app) usageCmd() *cobra.Command {
	var p periodFlags
	var by string
	var users int
	var asCSV bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Tokens and cost by skill, provider, model, user or day (role admin)",
		Example: `  yard usage                                   # this month, by skill
  yard usage --month 2026-10 --by user --pseudonymise
  yard usage --from 2026-11-01 --to 2026-11-08 --by day
  yard usage --csv --out usage.csv             # one row per day, skill, provider, model and user`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := p.query()
			if err != nil {
				return err
			}
			q.Users = users
			if asCSV {
				w, closeOut, err := p.output(a)
				if err != nil {
					return err
				}
				if _, err := a.client.Org.UsageCSV(cmd.Context(), q, w); err != nil {
					_ = closeOut()
					return err
				}
				return closeOut()
			}
			rows := map[string]func(client.Usage) []client.UsageShare{
				"skill":    func(u client.Usage) []client.UsageShare { return u.BySkill },
				"provider": func(u client.Usage) []client.UsageShare { return u.ByProvider },
				"model":    func(u client.Usage) []client.UsageShare { return u.ByModel },
				"user":     func(u client.Usage) []client.UsageShare { return u.ByUser },
				"day": func(u client.Usage) []client.UsageShare {
					out := make([]client.UsageShare, len(u.ByDay))
					for i, d := range u.ByDay {
						out[i] = client.UsageShare{Key: d.Day, UsageAmount: d.UsageAmount}
					}
					return out
				},
			}[by]
			if rows == nil {
				return usageError{fmt.Errorf("--by must be skill, provider, model, user or day, not %q", by)}
			}
			u, err := a.client.Org.UsageReport(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(u)
			}
			fmt.Fprintf(a.out, "%s – %s: %d calls, %d tokens (%d in, %d out), $%.6f",
				u.From.Format(time.RFC3339), u.To.Format(time.RFC3339), u.Calls, u.Tokens, u.TokensIn, u.TokensOut, u.CostUSD)
			if u.UnknownCalls > 0 {
				fmt.Fprintf(a.out, "; %d calls cut off (outcome unknown)", u.UnknownCalls)
			}
			fmt.Fprintln(a.out)
			m := u.ThisMonth
			fmt.Fprintf(a.out, "this month (%s): %d tokens of %s, $%.6f of %s\n", m.Month, m.Tokens,
				orUnlimited(m.MonthlyTokenQuota, func(v int64) string { return fmt.Sprint(v) }), m.CostUSD,
				orUnlimited(m.MonthlyBudgetUSD, func(v float64) string { return fmt.Sprintf("$%.2f", v) }))
			w := a.table()
			fmt.Fprintf(w, "%s\tCALLS\tTOKENS\tCOST_USD\n", map[string]string{"skill": "SKILL", "provider": "PROVIDER",
				"model": "PROVIDER/MODEL", "user": "USER", "day": "DAY"}[by])
			for _, r := range rows(u) {
				key := r.Key
				if key == "" {
					key = "(none)"
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%.6f\n", key, r.Calls, r.Tokens, r.CostUSD)
			}
			if by == "user" && u.UsersTotal > int64(len(u.ByUser)) {
				fmt.Fprintf(w, "(%d more users: --users N)\t\t\t\n", u.UsersTotal-int64(len(u.ByUser)))
			}
			return w.Flush()
		},
	}
	p.add(cmd)
	cmd.Flags().StringVar(&by, "by", "skill", "breakdown: skill, provider, model, user or day")
	cmd.Flags().IntVar(&users, "users", 0, "how many users (largest cost first) to list, 1–1000 (default 20)")
	cmd.Flags().BoolVar(&asCSV, "csv", false, "write the CSV (one row per day, skill, provider, model and user)")
	return cmd
}

func orUnlimited[T any](v *T, f func(T) string) string {
	if v == nil {
		return "unlimited"
	}
	return f(*v)
}

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Export the audit record of every LLM call (role admin)"}
	var p periodFlags
	export := &cobra.Command{
		Use:   "export",
		Short: "Write every LLM call of a period as JSON Lines, streamed",
		Example: `  yard audit export --from 2026-10-01 --to 2026-11-01 --pseudonymise --out audit-2026-10.jsonl
  yard audit export | jq -c 'select(.outcome == "unknown")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := p.query()
			if err != nil {
				return err
			}
			w, closeOut, err := p.output(a)
			if err != nil {
				return err
			}
			n, err := a.client.Org.AuditExport(cmd.Context(), q, w)
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if p.out != "" && p.out != "-" {
				fmt.Fprintf(a.errOut, "wrote %d bytes to %s\n", n, p.out)
			}
			return nil
		},
	}
	p.add(export)
	cmd.AddCommand(export)
	return cmd
}
