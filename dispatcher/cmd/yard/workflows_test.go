package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
)

// workflowsDir is the repository's workflows/.
var workflowsDir = filepath.Join("..", "..", "..", "workflows")

// TestWorkflowLintRunAndApply: lint prints each problem as FILE:LINE:COL with its rule and
// hint and exits 1; run submits a file ad hoc (inputs typed) or dispatches a registered
// workflow; apply syncs workflows/ with the diff first, leaving plain skills alone.
func TestWorkflowLintRunAndApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dir := t.TempDir()

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\non: workflow_dispatch\njobs:\n  a:\n    runs-on: any\n    steps:\n      - uses: actions/checkout@v4\n"), 0o600))
	r := b.yard("", "workflow", "lint", bad)
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stdout, bad+":7:15: ")
	require.Contains(t, r.stdout, "[skill-call]")
	require.Contains(t, r.stdout, "hint: ")
	require.Contains(t, r.stderr, "1 problem(s)")

	good := filepath.Join(workflowsDir, "research-fan-out.yaml")
	r = b.yard("", "workflow", "lint", good)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `valid — "research-fan-out", 2 job(s)`)

	r = b.yard("", "workflow", "run", good, "--input", "topic=otters", "--input", "depth=detailed", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var res client.DispatchResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.NotEmpty(t, res.ChainID)
	ch, err := b.api.Chain(ctx, res.ChainID)
	require.NoError(t, err)
	require.Equal(t, "adhoc.research-fan-out", ch.JobType)
	require.NotNil(t, ch.Workflow)
	require.Len(t, ch.Workflow.Jobs, 2)

	r = b.yard("", "workflow", "run", good, "--input", "depth=huge")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "VALIDATION_FAILED")
	require.Contains(t, r.stderr, "topic")

	// apply: the repository's workflows are new here; then one changes by a line.
	cp := t.TempDir()
	entries, err := os.ReadDir(workflowsDir)
	require.NoError(t, err)
	for _, e := range entries {
		src, err := os.ReadFile(filepath.Join(workflowsDir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(cp, e.Name()), src, 0o600))
	}
	r = b.yard("", "workflows", "apply", "--dir", cp, "--yes")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "+ content-pipeline (new)")
	require.Contains(t, r.stdout, "created research-fan-out (version 1)")
	require.NotContains(t, r.stdout, "demo_llm", "plain skills are not workflows: not listed as having no file")

	path := filepath.Join(cp, "research-fan-out.yaml")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), "max-parallel: 3", "max-parallel: 2", 1)), 0o600))
	r = b.yard("", "workflows", "apply", "--dir", cp, "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "~ research-fan-out\n    workflow:\n")
	require.Contains(t, r.stdout, "-      max-parallel: 3")
	require.Contains(t, r.stdout, "+      max-parallel: 2")
	require.Contains(t, r.stdout, "1 to apply")

	r = b.yard("", "workflow", "run", "research-fan-out", "--input", "topic=tides", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.NotEmpty(t, res.ChainID, "a registered workflow is dispatched by its job type")
}
