package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

// providersCmd administers the organisation's providers (role admin): endpoints, API keys
// (sealed for the router, never shown again), Test connection, routing, limits and prices.
func (a *app) providersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "providers", Short: "Manage the organisation's LLM providers, keys, routing, limits and prices (role admin)"}
	cmd.AddCommand(a.providersListCmd(), a.providersPutCmd(), a.providersDeleteCmd(), a.providersSetKeyCmd(),
		a.providersRevokeKeyCmd(), a.providersTestCmd(), a.providersRoutingCmd(), a.providersLimitsCmd(), a.providersPricesCmd())
	return cmd
}

func (a *app) providersListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List providers with their models and key (last four characters only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := a.client.Providers.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(ps))
			}
			w := a.table()
			fmt.Fprintln(w, "NAME\tKIND\tJURISDICTION\tENABLED\tMODELS\tKEY\tBASE URL")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", p.Name, p.Kind, p.Jurisdiction, p.Enabled, models(p.Models),
					keyState(p.Credential), p.BaseURL)
			}
			return w.Flush()
		},
	}
}

func models(m map[string]string) string {
	var out []string
	for role, model := range m {
		out = append(out, role+"="+model)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func keyState(c *client.CredentialInfo) string {
	switch {
	case c == nil:
		return "none"
	case c.RevokedAt != nil:
		return "revoked " + c.RevokedAt.Local().Format("2006-01-02 15:04")
	}
	return "…" + c.Last4 + " set " + c.SetAt.Local().Format("2006-01-02 15:04")
}

func (a *app) providersPutCmd() *cobra.Command {
	var spec client.ProviderSpec
	var modelFlags []string
	var disabled bool
	cmd := &cobra.Command{
		Use:   "put NAME --kind KIND [--base-url URL] [--jurisdiction eu|us|global] [--model ROLE=MODEL]...",
		Short: "Create or change a provider",
		Example: `  yard providers put openai --kind openai --model default=gpt-4o-mini --model reasoning=o3
  yard providers put vllm --kind openai_compatible --base-url http://vllm:8000/v1 --jurisdiction eu --model default=llama-3.1-8b`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Models = map[string]string{}
			for _, m := range modelFlags {
				role, model, ok := strings.Cut(m, "=")
				if !ok {
					return usageError{fmt.Errorf("--model %q: want ROLE=MODEL, e.g. default=gpt-4o-mini", m)}
				}
				spec.Models[role] = model
			}
			enabled := !disabled
			spec.Enabled = &enabled
			p, created, err := a.client.Providers.Put(cmd.Context(), args[0], spec)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(p)
			}
			verb := "updated"
			if created {
				verb = "created"
			}
			fmt.Fprintf(a.out, "%s provider %s (%s, %s)\n", verb, p.Name, p.Kind, models(p.Models))
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Kind, "kind", "", "openai, openrouter, openai_compatible, anthropic or gemini")
	cmd.Flags().StringVar(&spec.BaseURL, "base-url", "", "endpoint (required for openai_compatible)")
	cmd.Flags().StringVar(&spec.Jurisdiction, "jurisdiction", "", "eu, us or global (default global)")
	cmd.Flags().StringArrayVar(&modelFlags, "model", nil, "ROLE=MODEL; roles: default, fast, reasoning, code, long_context, creative")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "store the provider disabled")
	_ = cmd.MarkFlagRequired("kind")
	return cmd
}

func (a *app) providersDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a provider with its key and limits (refused while the routing policy names it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.Providers.Delete(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.done(map[string]any{"name": args[0], "deleted": true}, "deleted provider "+args[0])
		},
	}
}

// done prints a one-line result, or v as JSON.
func (a *app) done(v any, line string) error {
	if a.json() {
		return a.emit(v)
	}
	fmt.Fprintln(a.out, line)
	return nil
}

func (a *app) providersSetKeyCmd() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "set-key NAME [--key-file PATH|-]",
		Short: "Set or rotate the provider's API key (read from a file or stdin, never from the command line)",
		Long: "The key is sealed to the router's public key before it is stored: the dispatcher can write it but\n" +
			"never read it. Afterwards only its last four characters are shown.",
		Example: `  yard providers set-key openai --key-file openai.key
  printf %s "$OPENAI_API_KEY" | yard providers set-key openai`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw []byte
			var err error
			if keyFile == "" || keyFile == "-" {
				raw, err = io.ReadAll(bufio.NewReader(io.LimitReader(a.in, 64<<10)))
			} else {
				raw, err = os.ReadFile(keyFile)
			}
			if err != nil {
				return fmt.Errorf("reading the key: %w", err)
			}
			key := strings.TrimSpace(string(raw))
			clear(raw)
			if key == "" {
				return usageError{errors.New("set-key: the key is empty (give it on stdin or with --key-file)")}
			}
			info, err := a.client.Providers.SetKey(cmd.Context(), args[0], key)
			if err != nil {
				return err
			}
			return a.done(info, fmt.Sprintf("key …%s set for %s at %s", info.Last4, args[0], info.SetAt.Local().Format("2006-01-02 15:04:05")))
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "-", "file holding the key, or - for stdin")
	return cmd
}

func (a *app) providersRevokeKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke-key NAME",
		Short: "Revoke the provider's API key; calls to it fail CREDENTIAL_REVOKED until a new key is set",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.Providers.RevokeKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.done(map[string]any{"name": args[0], "revoked": true}, "revoked the key of "+args[0])
		},
	}
}

// errTestFailed makes `providers test` exit 1 after printing the provider's error.
var errTestFailed = errors.New("the provider test failed")

func (a *app) providersTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Test connection: send a tiny probe call through the normal path and show the provider's answer or error",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client.Providers.Test(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				if err := a.emit(r); err != nil {
					return err
				}
			} else if r.OK {
				fmt.Fprintf(a.out, "ok: %s (%s) answered %q in %d ms (job %s)\n", r.Provider, r.Model, r.Answer, r.LatencyMS, r.JobID)
			} else {
				fmt.Fprintf(a.out, "failed: %s: %v: %v (job %s)\n", r.Provider, r.Error["code"], r.Error["message"], r.JobID)
			}
			if !r.OK {
				cmd.SilenceErrors = true
				return errTestFailed
			}
			return nil
		},
	}
}

func (a *app) providersRoutingCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "routing",
		Short: "Show the routing policy (hint → provider, model)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pol, err := a.client.Providers.Routing(cmd.Context())
			if err != nil {
				return err
			}
			return a.printPolicy(pol)
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "set HINT=PROVIDER[:MODEL]...",
		Short:   "Replace the routing policy; refused, naming the rule, when a hint would reach no enabled provider or model",
		Example: `  yard providers routing set default=openai fast=openai:gpt-4o-mini reasoning=anthropic`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pol client.RoutingPolicy
			for _, arg := range args {
				hint, target, ok := strings.Cut(arg, "=")
				if !ok {
					return usageError{fmt.Errorf("%q: want HINT=PROVIDER[:MODEL]", arg)}
				}
				provider, model, _ := strings.Cut(target, ":")
				pol.Rules = append(pol.Rules, client.RoutingRule{Hint: hint, Provider: provider, Model: model})
			}
			out, err := a.client.Providers.SetRouting(cmd.Context(), pol)
			if err != nil {
				return err
			}
			return a.printPolicy(out)
		},
	})
	return cmd
}

func (a *app) printPolicy(pol client.RoutingPolicy) error {
	if a.json() {
		return a.emit(pol)
	}
	w := a.table()
	fmt.Fprintln(w, "HINT\tPROVIDER\tMODEL")
	for _, r := range pol.Rules {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.Hint, r.Provider, r.Model)
	}
	return w.Flush()
}

func (a *app) providersLimitsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show RPM/TPM limits per provider and model",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := a.client.Providers.Limits(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(ls))
			}
			w := a.table()
			fmt.Fprintln(w, "PROVIDER\tMODEL\tRPM\tTPM")
			for _, l := range ls {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", l.Provider, l.Model, l.RPM, l.TPM)
			}
			return w.Flush()
		},
	}
	var set client.LimitSet
	setCmd := &cobra.Command{
		Use:     "set PROVIDER MODEL --rpm N --tpm N",
		Short:   "Set a model's limits (0: no limit); every router follows within a second",
		Example: `  yard providers limits set openai gpt-4o-mini --rpm 500 --tpm 200000`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set.Provider, set.Model = args[0], args[1]
			l, err := a.client.Providers.SetLimit(cmd.Context(), set)
			if err != nil {
				return err
			}
			return a.done(l, fmt.Sprintf("%s %s: rpm %d, tpm %d", l.Provider, l.Model, l.RPM, l.TPM))
		},
	}
	setCmd.Flags().IntVar(&set.RPM, "rpm", 0, "requests per minute (0: no limit)")
	setCmd.Flags().IntVar(&set.TPM, "tpm", 0, "tokens per minute (0: no limit)")
	cmd.AddCommand(setCmd, &cobra.Command{
		Use:   "delete PROVIDER MODEL",
		Short: "Remove a model's limits",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.Providers.DeleteLimit(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			return a.done(map[string]any{"provider": args[0], "model": args[1], "deleted": true}, "removed the limits of "+args[0]+" "+args[1])
		},
	})
	return cmd
}

func (a *app) providersPricesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prices",
		Short: "Show the prices in effect (USD per million tokens): the organisation's own and the built-in defaults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := a.client.Providers.Prices(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(ps))
			}
			w := a.table()
			fmt.Fprintln(w, "KIND\tMODEL\tINPUT\tOUTPUT\tCACHED\tSOURCE")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%s\t%g\t%g\t%g\t%s\n", p.ProviderKind, p.Model, p.InputPerMTok, p.OutputPerMTok, p.CachedPerMTok, p.Source)
			}
			return w.Flush()
		},
	}
	var set client.PriceSet
	setCmd := &cobra.Command{
		Use:     "set KIND MODEL --input USD --output USD [--cached USD]",
		Short:   "Set the organisation's price of a model (USD per million tokens)",
		Example: `  yard providers prices set openai_compatible llama-3.1-8b --input 0.05 --output 0.10`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set.ProviderKind, set.Model = args[0], args[1]
			p, err := a.client.Providers.SetPrice(cmd.Context(), set)
			if err != nil {
				return err
			}
			return a.done(p, fmt.Sprintf("%s %s: input %g, output %g, cached %g USD per million tokens", p.ProviderKind, p.Model,
				p.InputPerMTok, p.OutputPerMTok, p.CachedPerMTok))
		},
	}
	setCmd.Flags().Float64Var(&set.InputPerMTok, "input", 0, "USD per million prompt tokens")
	setCmd.Flags().Float64Var(&set.OutputPerMTok, "output", 0, "USD per million completion tokens")
	setCmd.Flags().Float64Var(&set.CachedPerMTok, "cached", 0, "USD per million cached prompt tokens")
	cmd.AddCommand(setCmd, &cobra.Command{
		Use:   "delete KIND MODEL",
		Short: "Remove the organisation's price of a model (the default applies again)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.Providers.DeletePrice(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			return a.done(map[string]any{"providerKind": args[0], "model": args[1], "deleted": true}, "removed the price of "+args[0]+" "+args[1])
		},
	})
	return cmd
}
