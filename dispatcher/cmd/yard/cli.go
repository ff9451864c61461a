package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard-ai/switchyard/client"
)

// Exit codes: 0 success, 1 a failed call or a job that ended unsuccessfully, 2 bad usage.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// defaultKeyFile is where `make run` writes the development admin key.
const defaultKeyFile = ".run/admin.key"

// app is one invocation: its streams, its global flags and the client they configure.
type app struct {
	in     io.Reader
	out    io.Writer
	errOut io.Writer
	getenv func(string) string

	url     string
	key     string
	keyFile string
	output  string

	client *client.Client
}

// usageError marks errors in how yard was called (exit 2).
type usageError struct{ error }

// run executes yard with args and returns the process exit code.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer, getenv func(string) string) int {
	a := &app{in: in, out: out, errOut: errOut, getenv: getenv}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	a.printError(err)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") ||
		strings.HasPrefix(err.Error(), "unknown flag") || strings.Contains(err.Error(), "arg(s)") ||
		strings.Contains(err.Error(), "required flag") {
		return exitUsage
	}
	return exitError
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "yard",
		Short: "Dispatch, follow and govern Switchyard jobs",
		Long: "yard talks to a Switchyard dispatcher through its public API.\n\n" +
			"The dispatcher is --url (env SWITCHYARD_URL, default http://127.0.0.1:8080); the API key is\n" +
			"--key (env SWITCHYARD_API_KEY) or read from --key-file (default .run/admin.key when present).",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.connect()
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.url, "url", "", "dispatcher base URL (env SWITCHYARD_URL, default http://127.0.0.1:8080)")
	f.StringVar(&a.key, "key", "", "API key (env SWITCHYARD_API_KEY)")
	f.StringVar(&a.keyFile, "key-file", "", "file holding the API key (default .run/admin.key when present)")
	f.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	root.AddCommand(a.dispatchCmd(), a.batchCmd(), a.statusCmd(), a.listCmd(), a.spansCmd(), a.watchCmd(),
		a.cancelCmd(), a.approveCmd(), a.rejectCmd(), a.reviewsCmd(), a.chainCmd(), a.workflowCmd(), a.skillsCmd(), a.keysCmd(), a.orgsCmd(),
		a.providersCmd(), a.usageCmd(), a.auditCmd())
	return root
}

// connect resolves the URL and key and builds the client.
func (a *app) connect() error {
	if a.output != "text" && a.output != "json" {
		return usageError{fmt.Errorf("--output must be text or json, not %q", a.output)}
	}
	url := firstNonEmpty(a.url, a.getenv("SWITCHYARD_URL"), "http://127.0.0.1:8080")
	key := a.key
	if key == "" && a.keyFile != "" {
		b, err := os.ReadFile(a.keyFile)
		if err != nil {
			return fmt.Errorf("reading --key-file: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	key = firstNonEmpty(key, a.getenv("SWITCHYARD_API_KEY"))
	if key == "" {
		if b, err := os.ReadFile(defaultKeyFile); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	c, err := client.New(url, key, client.WithUserAgent("yard"))
	if err != nil {
		return usageError{err}
	}
	a.client = c
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (a *app) json() bool { return a.output == "json" }

// emit writes v as indented JSON.
func (a *app) emit(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// show writes v as JSON under -o json, else calls text.
func (a *app) show(v any, text func()) error {
	if a.json() {
		return a.emit(v)
	}
	text()
	return nil
}

// orEmpty returns s, or an empty slice when s is nil, so that -o json prints an empty
// list as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// table returns a tab writer for aligned text output; Flush it when done.
func (a *app) table() *tabwriter.Writer { return tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0) }

// printError writes err for a person (text) or a script (json, the API's error body).
func (a *app) printError(err error) {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		fmt.Fprintln(a.errOut, "yard:", err)
		return
	}
	if a.json() {
		enc := json.NewEncoder(a.errOut)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"error": true, "status": ae.Status, "code": ae.Code, "message": ae.Message,
			"troubleshooting": ae.Troubleshooting, "context": ae.Context})
		return
	}
	fmt.Fprintf(a.errOut, "yard: %s (%d): %s\n", ae.Code, ae.Status, ae.Message)
	for _, fe := range ae.FieldErrors() {
		fmt.Fprintf(a.errOut, "  %s: %s (%s)\n", fe.Field, fe.Message, fe.Rule)
	}
	keys := make([]string, 0, len(ae.Context))
	for k := range ae.Context {
		if k != "fields" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(a.errOut, "  %s: %s\n", k, compact(ae.Context[k]))
	}
	for _, t := range ae.Troubleshooting {
		fmt.Fprintln(a.errOut, "  hint:", t)
	}
}

// compact renders a value on one line: strings bare, everything else as JSON.
func compact(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// truncate shortens s to n runes for one-line display.
func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
