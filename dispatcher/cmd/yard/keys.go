package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage the organisation's API keys (role admin)"}
	cmd.AddCommand(a.keysCreateCmd(), a.keysListCmd(), a.keysRevokeCmd())
	return cmd
}

func (a *app) keysCreateCmd() *cobra.Command {
	var roles []string
	cmd := &cobra.Command{
		Use:     "create NAME --role ROLE[,ROLE]",
		Short:   "Create a key; its secret is printed this once",
		Example: `  yard keys create crm-service --role dispatch,viewer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.client.Keys.Create(cmd.Context(), args[0], roles...)
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(k)
			}
			fmt.Fprintf(a.out, "created key %s (%s) with roles %s\n", k.Name, k.ID, strings.Join(k.Roles, ","))
			fmt.Fprintf(a.out, "secret (shown once, store it now):\n%s\n", k.Secret)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&roles, "role", nil, "dispatch, approve, skills_admin, viewer or admin (repeat or comma-separate)")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func (a *app) keysListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := a.client.Keys.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.emit(orEmpty(keys))
			}
			w := a.table()
			fmt.Fprintln(w, "ID\tNAME\tPREFIX\tROLES\tCREATED\tSTATE")
			for _, k := range keys {
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked " + k.RevokedAt.Local().Format("2006-01-02")
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, strings.Join(k.Roles, ","),
					k.CreatedAt.Local().Format("2006-01-02 15:04"), state)
			}
			return w.Flush()
		},
	}
}

func (a *app) keysRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke a key; requests with it fail from then on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.Keys.Revoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.json() {
				return a.emit(map[string]any{"id": args[0], "revoked": true})
			}
			fmt.Fprintf(a.out, "revoked %s\n", args[0])
			return nil
		},
	}
}
