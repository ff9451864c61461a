package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

// orgsCmd is the platform operator's: it needs an operator key (make run writes one to
// .run/operator.key: yard --key-file .run/operator.key orgs list).
func (a *app) orgsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "orgs", Short: "Manage organisations (a platform operator key)"}
	cmd.AddCommand(a.orgsCreateCmd(), a.orgsListCmd(), a.orgsShowCmd(), a.orgsSetCmd(), a.orgsSuspendCmd(),
		a.orgsResumeCmd(), a.orgsAdminKeyCmd())
	return cmd
}

// orgLimits are the flags of the settings an operator sets, shared by create and set.
type orgLimits struct {
	name, jurisdiction          string
	orgRPM, userRPM, maxBacklog int
	tokenQuota                  int64
	costBudget                  float64
}

func (l *orgLimits) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&l.name, "name", "", "the organisation's display name")
	f.StringVar(&l.jurisdiction, "jurisdiction", "", "where its data may be processed: eu, us or other")
	f.IntVar(&l.orgRPM, "org-rpm", 0, "dispatches per minute for the whole organisation (0: unlimited)")
	f.IntVar(&l.userRPM, "user-rpm", 0, "dispatches per minute per user (0: unlimited)")
	f.IntVar(&l.maxBacklog, "max-backlog", 0, "runs queued or running at most (0: no cap)")
	f.Int64Var(&l.tokenQuota, "token-quota", 0, "LLM tokens per calendar month")
	f.Float64Var(&l.costBudget, "cost-budget", 0, "LLM cost per calendar month, in USD")
}

// set copies the flags given on the command line into the fields of a request.
func set[T any](cmd *cobra.Command, flag string, v T, dst **T) {
	if cmd.Flags().Changed(flag) {
		*dst = &v
	}
}

func (a *app) orgsCreateCmd() *cobra.Command {
	var l orgLimits
	cmd := &cobra.Command{
		Use:   "create SLUG --name NAME --jurisdiction eu|us|other",
		Short: "Create an organisation; then issue its first admin key with `yard orgs admin-key SLUG`",
		Example: `  yard orgs create acme --name "Acme Corp" --jurisdiction eu --cost-budget 500
  yard orgs admin-key acme`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := client.OrgCreate{Slug: args[0], Name: l.name, Jurisdiction: l.jurisdiction}
			set(cmd, "org-rpm", l.orgRPM, &req.OrgRPM)
			set(cmd, "user-rpm", l.userRPM, &req.UserRPM)
			set(cmd, "max-backlog", l.maxBacklog, &req.MaxBacklog)
			set(cmd, "token-quota", l.tokenQuota, &req.MonthlyTokenQuota)
			set(cmd, "cost-budget", l.costBudget, &req.MonthlyCostBudgetUSD)
			o, err := a.client.Orgs.Create(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.show(o, func() { a.printOrg(o) })
		},
	}
	l.flags(cmd)
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("jurisdiction")
	return cmd
}

func (a *app) orgsSetCmd() *cobra.Command {
	var l orgLimits
	var clearQuota, clearBudget bool
	cmd := &cobra.Command{
		Use:     "set ORG [--jurisdiction J] [--token-quota N] [--cost-budget USD] ...",
		Short:   "Change an organisation's name, jurisdiction, limits, token quota or cost budget",
		Example: `  yard orgs set acme --cost-budget 1000 --org-rpm 600`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p client.OperatorOrgPatch
			set(cmd, "name", l.name, &p.Name)
			set(cmd, "jurisdiction", l.jurisdiction, &p.Jurisdiction)
			set(cmd, "org-rpm", l.orgRPM, &p.OrgRPM)
			set(cmd, "user-rpm", l.userRPM, &p.UserRPM)
			set(cmd, "max-backlog", l.maxBacklog, &p.MaxBacklog)
			set(cmd, "token-quota", l.tokenQuota, &p.MonthlyTokenQuota)
			set(cmd, "cost-budget", l.costBudget, &p.MonthlyCostBudgetUSD)
			p.ClearTokenQuota, p.ClearCostBudget = clearQuota, clearBudget
			o, err := a.client.Orgs.Update(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return a.show(o, func() { a.printOrg(o) })
		},
	}
	l.flags(cmd)
	cmd.Flags().BoolVar(&clearQuota, "clear-token-quota", false, "remove the token quota")
	cmd.Flags().BoolVar(&clearBudget, "clear-cost-budget", false, "remove the cost budget")
	return cmd
}

func (a *app) orgsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Every organisation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			orgs, err := a.client.Orgs.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(orgs))
			}
			w := a.table()
			fmt.Fprintln(w, "SLUG\tNAME\tJURISDICTION\tSTATE\tTOKEN QUOTA\tCOST BUDGET\tID")
			for _, o := range orgs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Slug, o.Name, o.Jurisdiction, orgState(o),
					orNoneOf(o.MonthlyTokenQuota, func(v int64) string { return strconv.FormatInt(v, 10) }),
					orNoneOf(o.MonthlyCostBudgetUSD, func(v float64) string { return fmt.Sprintf("$%.2f", v) }), o.ID)
			}
			return w.Flush()
		},
	}
}

func (a *app) orgsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ORG",
		Short: "One organisation, with what operators did to it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.client.Orgs.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.show(d, func() {
				a.printOrg(d.Org)
				fmt.Fprintln(a.out, "audit:")
				for _, e := range d.Audit {
					line := fmt.Sprintf("  %s  %-9s by %s", e.At.Local().Format("2006-01-02 15:04:05"), e.Action, e.Actor)
					if e.Reason != "" {
						line += ": " + e.Reason
					}
					fmt.Fprintln(a.out, line)
				}
			})
		},
	}
}

func (a *app) orgsSuspendCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "suspend ORG --reason TEXT",
		Short: "Suspend an organisation: it dispatches nothing, and its queued, held and running work is cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client.Orgs.Suspend(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			return a.show(s, func() {
				fmt.Fprintf(a.out, "organisation %s suspended by %s: %s\n", s.Org.Slug, s.Org.SuspendedBy, s.Org.SuspendReason)
				fmt.Fprintf(a.out, "%d run(s) or chain(s) cancelled, %d running run(s) asked to stop\n", s.Cancelled, s.CancelRequested)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded and shown to the organisation's callers)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (a *app) orgsResumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume ORG",
		Short: "Resume a suspended organisation (cancelled work stays cancelled)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := a.client.Orgs.Resume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.show(o, func() { fmt.Fprintf(a.out, "organisation %s resumed\n", o.Slug) })
		},
	}
}

func (a *app) orgsAdminKeyCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "admin-key ORG [--name NAME]",
		Short: "Issue an admin key of the organisation; its secret is printed this once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.client.Orgs.CreateAdminKey(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(k)
			}
			fmt.Fprintf(a.out, "created admin key %s (%s) of %s\n", k.Name, k.ID, args[0])
			fmt.Fprintf(a.out, "secret (shown once, give it to the organisation's admin):\n%s\n", k.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the key's name (default admin)")
	return cmd
}

func (a *app) printOrg(o client.Org) {
	w := a.table()
	fmt.Fprintf(w, "slug\t%s\nid\t%s\nname\t%s\njurisdiction\t%s\nstate\t%s\n", o.Slug, o.ID, o.Name, o.Jurisdiction, orgState(o))
	if o.SuspendedAt != nil {
		fmt.Fprintf(w, "suspended\t%s by %s: %s\n", o.SuspendedAt.Local().Format("2006-01-02 15:04:05"), o.SuspendedBy, o.SuspendReason)
	}
	fmt.Fprintf(w, "org rpm\t%d\nuser rpm\t%d\nmax backlog\t%d\ntoken quota\t%s\ncost budget\t%s\n", o.OrgRPM, o.UserRPM, o.MaxBacklog,
		orNoneOf(o.MonthlyTokenQuota, func(v int64) string { return strconv.FormatInt(v, 10) + " tokens/month" }),
		orNoneOf(o.MonthlyCostBudgetUSD, func(v float64) string { return fmt.Sprintf("$%.2f/month", v) }))
	_ = w.Flush()
}

func orgState(o client.Org) string {
	if o.SuspendedAt != nil {
		return "suspended"
	}
	return "active"
}

func orNoneOf[T any](v *T, f func(T) string) string {
	if v == nil {
		return "none"
	}
	return f(*v)
}
