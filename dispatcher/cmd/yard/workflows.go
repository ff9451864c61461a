package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func (a *app) workflowCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "workflow", Aliases: []string{"workflows"},
		Short: "Check, run and sync workflows (GitHub Actions syntax, run as chains)"}
	cmd.AddCommand(a.workflowLintCmd(), a.workflowRunCmd(),
		a.applyCmd(fileCatalogue{command: "workflows", dir: "workflows", load: skill.LoadWorkflowDir,
			managed: func(s client.Skill) bool { return s.Workflow != "" }}))
	return cmd
}

func (a *app) workflowLintCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lint FILE",
		Short: "Check a workflow file against the organisation's skills and queues",
		Long: "lint sends FILE to POST /api/v1/workflows/validate and prints every problem as\n" +
			"FILE:LINE:COLUMN: message [rule], with a hint to repair it. It exits 1 when there is one.",
		Example: "  yard workflow lint workflows/content_pipeline.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := a.readFile(args[0])
			if err != nil {
				return err
			}
			check, err := a.client.ValidateWorkflow(cmd.Context(), string(src))
			if problems := workflowProblems(err); problems != nil {
				if a.json() {
					if err := a.emit(map[string]any{"valid": false, "problems": problems}); err != nil {
						return err
					}
				} else {
					for _, p := range problems {
						fmt.Fprintf(a.out, "%s:%d:%d: %s [%s]\n", args[0], p.Line, p.Column, p.Message, p.Rule)
						if p.Hint != "" {
							fmt.Fprintf(a.out, "    hint: %s\n", p.Hint)
						}
					}
				}
				return fmt.Errorf("%s: %d problem(s)", args[0], len(problems))
			}
			if err != nil {
				return err
			}
			return a.show(check, func() {
				fmt.Fprintf(a.out, "%s: valid — %q, %d job(s), %d step(s), inputs: %s\n", args[0], check.Name,
					len(check.Jobs), check.Steps, orNone(check.Inputs))
			})
		},
	}
}

// workflowProblems returns the problems of a VALIDATION_FAILED answer that places them in
// the file; nil for any other error.
func workflowProblems(err error) []client.FieldError {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != "VALIDATION_FAILED" {
		return nil
	}
	var out []client.FieldError
	for _, f := range ae.FieldErrors() {
		if f.Line > 0 {
			out = append(out, f)
		}
	}
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (a *app) workflowRunCmd() *cobra.Command {
	var inputs []string
	var run client.WorkflowRun
	var priority string
	var watch bool
	cmd := &cobra.Command{
		Use:   "run FILE|JOB_TYPE",
		Short: "Run a workflow file once (ad hoc), or a registered workflow by its job type",
		Long: "run submits FILE to POST /api/v1/workflows/run with its inputs (--input name=value,\n" +
			"repeatable; a value that is JSON — true, 3, [..] — is sent as such, anything else as a\n" +
			"string). An argument that is not a file is taken for a registered workflow's job type and\n" +
			"dispatched. With --watch it follows the run like `yard chain watch` and exits 1 unless\n" +
			"the workflow completes.",
		Example: `  yard workflow run workflows/content_pipeline.yaml --input topic="tidal power" --watch
  yard workflow run content_pipeline --input topic=otters`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := map[string]any{}
			for _, kv := range inputs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--input %q: want name=value", kv)}
				}
				var typed any
				if json.Unmarshal([]byte(v), &typed) == nil && !isString(typed) {
					in[k] = typed
				} else {
					in[k] = v
				}
			}
			run.Inputs, run.Priority = in, client.Priority(priority)
			var res client.DispatchResult
			src, err := a.readFile(args[0])
			switch {
			case err == nil:
				run.Workflow = string(src)
				res, err = a.client.RunWorkflow(cmd.Context(), run)
			case strings.ContainsAny(args[0], "/\\") || strings.HasSuffix(args[0], ".yaml") || strings.HasSuffix(args[0], ".yml"):
				return err // meant a file
			default:
				res, err = a.client.Dispatch(cmd.Context(), client.DispatchRequest{JobType: args[0], Payload: in,
					UserID: run.UserID, Priority: run.Priority, IdempotencyKey: run.IdempotencyKey})
			}
			if problems := workflowProblems(err); problems != nil && !a.json() {
				for _, p := range problems {
					fmt.Fprintf(a.out, "%s:%d:%d: %s [%s]\n", args[0], p.Line, p.Column, p.Message, p.Rule)
				}
			}
			if err != nil {
				return err
			}
			if err := a.show(res, func() { a.printDispatch(res) }); err != nil {
				return err
			}
			if res.ChainID == "" {
				return fmt.Errorf("%s started no workflow: it was dispatched as job %s", args[0], res.JobID)
			}
			if watch {
				return a.followChain(cmd, res.ChainID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&inputs, "input", "i", nil, "an input as name=value (repeatable)")
	f.StringVar(&run.UserID, "user", "", "end user the run is for (per-user rate limits)")
	f.StringVar(&priority, "priority", "", "critical, high, normal (default) or low")
	f.StringVar(&run.IdempotencyKey, "idempotency-key", "", "repeat-safe key: a repeat returns the original run")
	f.BoolVarP(&watch, "watch", "w", false, "follow the run until it ends")
	return cmd
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}
