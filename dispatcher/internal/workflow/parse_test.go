package workflow_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

const repo = "../../.."

// catalogue is the platform as the repository describes it: the skills of skills/ and the
// runner labels of .github/actionlint.yaml.
func catalogue(t *testing.T) workflow.Options {
	t.Helper()
	skills, err := skill.LoadDir(filepath.Join(repo, "skills"))
	require.NoError(t, err)
	known := map[string]bool{}
	for _, s := range skills {
		known[s.JobType] = true
	}
	cfg, err := actionlint.ReadConfigFile(filepath.Join(repo, ".github", "actionlint.yaml"))
	require.NoError(t, err)
	return workflow.Options{
		RunnerLabels: cfg.SelfHostedRunner.Labels,
		KnownSkill:   func(jobType string) bool { return known[jobType] },
	}
}

// TestExamplesParseAndPassActionlint: every file of workflows/ has no problem for the
// platform, and passes actionlint unchanged with the repository's configuration.
func TestExamplesParseAndPassActionlint(t *testing.T) {
	t.Parallel()
	opts := catalogue(t)
	files, err := filepath.Glob(filepath.Join(repo, "workflows", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			wf, problems := workflow.Parse(src, opts)
			require.Empty(t, problems)
			require.NotEmpty(t, wf.Jobs)

			linter, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{
				ConfigFile: filepath.Join(repo, ".github", "actionlint.yaml"),
			})
			require.NoError(t, err)
			errs, err := linter.Lint(f, src, nil)
			require.NoError(t, err)
			require.Empty(t, errs)
		})
	}
}

func TestParseFillsTheModel(t *testing.T) {
	t.Parallel()
	src := `name: model
on:
  workflow_dispatch:
    inputs:
      topic: {type: string, required: true}
      count: {type: number, default: 3}
      loud: {type: boolean, default: true}
      tone: {type: choice, options: [dry, warm], default: warm}
  workflow_call:
    inputs:
      topic: {type: string, required: true}
    outputs:
      text:
        value: ${{ jobs.second.outputs.text }}
env:
  LEVEL: top
jobs:
  second:
    runs-on: gpu
    needs: first
    if: ${{ needs.first.result == 'success' }}
    env: {LEVEL: job}
    timeout-minutes: 7.5
    continue-on-error: true
    outputs:
      text: ${{ steps.s.outputs.result }}
    strategy:
      matrix:
        size: [1, 2.5]
        flag: [true, "x", null]
        obj: [{Name: a}]
        exclude:
          - size: 1
            flag: null
    steps:
      - id: s
        name: Say
        uses: ./skills/demo_llm
        if: always()
        env: {LEVEL: step}
        timeout-minutes: 2
        continue-on-error: true
        with:
          prompt: "On ${{ inputs.topic }}"
          Count: 3
          ratio: 0.5
          on: true
          quoted: "true"
          empty:
          whole: ${{ inputs.count }}
  first:
    runs-on: any
    steps:
      - uses: ./skills/demo_llm
        with: {prompt: hi}
`
	wf, problems := workflow.Parse([]byte(src), catalogue(t))
	require.Empty(t, problems)
	require.Equal(t, "model", wf.Name)
	require.Equal(t, map[string]string{"LEVEL": "top"}, wf.Env)

	require.Len(t, wf.Inputs, 4, "topic is declared under both triggers alike: once")
	require.Equal(t, workflow.Input{Name: "topic", Type: "string", Required: true, Pos: workflow.Pos{Line: 5, Col: 7}}, wf.Inputs[0])
	require.Equal(t, 3.0, wf.Inputs[1].Default)
	require.Equal(t, true, wf.Inputs[2].Default)
	require.Equal(t, "choice", wf.Inputs[3].Type)
	require.Equal(t, []string{"dry", "warm"}, wf.Inputs[3].Options)
	require.Equal(t, "warm", wf.Inputs[3].Default)
	require.Equal(t, []workflow.Output{{Name: "text", Value: "${{ jobs.second.outputs.text }}", Pos: workflow.Pos{Line: 13, Col: 7}}}, wf.Outputs)

	require.Len(t, wf.Jobs, 2)
	j := wf.Jobs[0]
	require.Equal(t, "second", j.ID, "jobs in file order")
	require.Equal(t, []string{"first"}, j.Needs)
	require.Equal(t, "needs.first.result == 'success'", j.If)
	require.Equal(t, "gpu", j.RunsOn)
	require.Equal(t, map[string]string{"LEVEL": "job"}, j.Env)
	require.Equal(t, 7.5, j.TimeoutMinutes)
	require.True(t, j.ContinueOnError)
	require.Equal(t, map[string]string{"text": "${{ steps.s.outputs.result }}"}, j.Outputs)
	require.Equal(t, workflow.Pos{Line: 18, Col: 3}, j.Pos)

	m := j.Matrix
	require.NotNil(t, m)
	require.True(t, m.FailFast, "GitHub's default")
	require.Equal(t, []workflow.Dimension{
		{Name: "size", Values: []any{1.0, 2.5}},
		{Name: "flag", Values: []any{true, "x", nil}},
		{Name: "obj", Values: []any{map[string]any{"Name": "a"}}},
	}, m.Dimensions)
	require.Equal(t, []map[string]any{{"size": 1.0, "flag": nil}}, m.Exclude)

	s := j.Steps[0]
	require.Equal(t, "s", s.ID)
	require.Equal(t, "Say", s.Name)
	require.Equal(t, "demo_llm", s.JobType)
	require.Equal(t, "./skills/demo_llm", s.Uses)
	require.Equal(t, "always()", s.If)
	require.Equal(t, map[string]string{"LEVEL": "step"}, s.Env)
	require.Equal(t, 2.0, s.TimeoutMinutes)
	require.True(t, s.ContinueOnError)
	require.Equal(t, map[string]any{
		"prompt": "On ${{ inputs.topic }}", "Count": 3.0, "ratio": 0.5, "on": true,
		"quoted": "true", "empty": nil, "whole": "${{ inputs.count }}",
	}, s.With)

	require.Equal(t, "", wf.Jobs[1].RunsOn, "any: each skill's own queue")
	require.Nil(t, wf.Jobs[1].Matrix)
}

// TestRefusals: each rule names the line and column of what it refuses, and a hint.
func TestRefusals(t *testing.T) {
	t.Parallel()
	opts := catalogue(t)
	head := "name: t\non: workflow_dispatch\njobs:\n  a:\n    runs-on: any\n"
	step := "    steps:\n      - uses: ./skills/demo_llm\n        with: {prompt: hi}\n"
	for _, tc := range []struct {
		name, src  string
		line, col  int
		rule, hint string
	}{
		{"run step", head + "    steps:\n      - run: echo hi\n", 7, 9, workflow.RuleShellStep, "replace `run:` with a skill call: `uses: ./skills/<job_type>`"},
		{"marketplace action", head + "    steps:\n      - uses: actions/checkout@v4\n", 7, 15, workflow.RuleSkillCall, "uses: ./skills/<job_type>"},
		{"docker action", head + "    steps:\n      - uses: docker://alpine:3\n", 7, 15, workflow.RuleSkillCall, "uses: ./skills/<job_type>"},
		{"local action", head + "    steps:\n      - uses: ./.github/actions/x\n", 7, 15, workflow.RuleSkillCall, "uses: ./skills/<job_type>"},
		{"not a job type", head + "    steps:\n      - uses: ./skills/Demo@v1\n", 7, 15, workflow.RuleSkillCall, "uses: ./skills/<job_type>"},
		{"unknown skill", head + "    steps:\n      - uses: ./skills/nope\n", 7, 15, workflow.RuleUnknownSkill, "yard skills list"},
		{"container", head + "    container: alpine\n" + step, 6, 5, workflow.RuleUnsupportedKey, "remove `container`"},
		{"services", head + "    services:\n      db: {image: postgres}\n" + step, 7, 7, workflow.RuleUnsupportedKey, "remove `services`"},
		{"environment", head + "    environment: prod\n" + step, 6, 5, workflow.RuleUnsupportedKey, "remove `environment`"},
		{"job concurrency", head + "    concurrency: g\n" + step, 6, 5, workflow.RuleUnsupportedKey, "remove `concurrency`"},
		{"workflow concurrency", "concurrency: g\n" + head + step, 1, 1, workflow.RuleUnsupportedKey, "remove `concurrency`"},
		{"defaults", head + "    defaults:\n      run: {shell: bash}\n" + step, 6, 5, workflow.RuleUnsupportedKey, "remove `defaults`"},
		{"run-name", "run-name: x\n" + head + step, 1, 11, workflow.RuleUnsupportedKey, "remove `run-name`"},
		{"push trigger", "name: t\non:\n  workflow_dispatch:\n  push:\njobs:\n  a:\n    runs-on: any\n" + step, 4, 3, workflow.RuleTrigger, "on: workflow_dispatch:"},
		{"workflow_call secrets", "name: t\non:\n  workflow_call:\n    secrets:\n      key: {required: true}\njobs:\n  a:\n    runs-on: any\n" + step,
			5, 7, workflow.RuleUnsupportedKey, "remove `secrets:`"},
		{"secrets context", head + "    steps:\n      - uses: ./skills/demo_llm\n        with: {prompt: 'key ${{ secrets.KEY }}'}\n", 8, 33, workflow.RuleContext, "remove the secret"},
		{"github context", head + "    steps:\n      - uses: ./skills/demo_llm\n        with:\n          prompt: ${{ github.event.inputs.x }}\n", 9, 23, workflow.RuleContext, "inputs.<name>"},
		{"github in a bare if", head + "    if: github.ref == 'x'\n" + step, 6, 9, workflow.RuleContext, "inputs.<name>"},
		{"runner in a step's bare if", head + "    steps:\n      - uses: ./skills/demo_llm\n        if: runner.os == 'Linux'\n        with: {prompt: hi}\n",
			8, 13, workflow.RuleContext, "remove the reference"},
		{"hashFiles", head + "    steps:\n      - uses: ./skills/demo_llm\n        with:\n          prompt: ${{ hashFiles('x') }}\n", 9, 23, workflow.RuleContext, "hashFiles"},
		{"runs-on not a queue", "name: t\non: workflow_dispatch\njobs:\n  a:\n    runs-on: ubuntu-latest\n" + step, 5, 14, workflow.RuleRunsOn, "runs-on: any"},
		{"runs-on two labels", "name: t\non: workflow_dispatch\njobs:\n  a:\n    runs-on: [default, gpu]\n" + step, 5, 24, workflow.RuleRunsOn, "one label"},
		{"runs-on expression", "name: t\non: workflow_dispatch\njobs:\n  a:\n    runs-on: ${{ 'default' }}\n" + step, 5, 14, workflow.RuleRunsOn, "one label"},
		{"continue-on-error expression", head + "    continue-on-error: ${{ true }}\n" + step, 6, 24, workflow.RuleStaticValue, "true or false"},
		{"timeout expression", head + "    timeout-minutes: ${{ 3 }}\n" + step, 6, 22, workflow.RuleStaticValue, "timeout-minutes: 10"},
		{"fail-fast expression", head + "    strategy:\n      fail-fast: ${{ false }}\n      matrix: {a: [1]}\n" + step, 7, 18, workflow.RuleStaticValue, "true or false"},
		{"include entry expression", head + "    strategy:\n      matrix:\n        a: [1]\n        include:\n          - ${{ fromJSON('{}') }}\n" + step,
			10, 13, workflow.RuleStaticValue, "include: ${{ fromJSON(…) }}"},
		{"environment input", "name: t\non:\n  workflow_dispatch:\n    inputs:\n      env: {type: environment}\njobs:\n  a:\n    runs-on: any\n" + step,
			5, 7, workflow.RuleInput, "type string"},
		{"job calls a workflow", "name: t\non: workflow_dispatch\njobs:\n  a:\n    uses: ./.github/workflows/x.yaml\n", 5, 11, workflow.RuleSkillCall, "workflows do not nest"},
		{"matrix over 256", head + "    strategy:\n      matrix:\n        a: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n        b: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]\n" + step,
			7, 7, workflow.RuleMatrixSize, "exclude"},
		// actionlint's rules, with the platform's hints.
		{"step ids unique", head + "    steps:\n      - id: x\n        uses: ./skills/demo_llm\n      - id: x\n        uses: ./skills/demo_llm\n", 9, 13, "id", "own id"},
		{"no steps", head, 4, 3, "syntax-check", "GitHub Actions workflow syntax"},
		{"jobs context in a job", head + "    env:\n      X: ${{ jobs.b.outputs.y }}\n" + step, 7, 14, "expression", "needs.<job>.outputs.<key>"},
		{"yaml", "name: t\non: [\n", 2, 1, "syntax-check", "fix the YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wf, problems := workflow.Parse([]byte(tc.src), opts)
			require.Equal(t, tc.rule == "syntax-check" && strings.Contains(tc.hint, "YAML"), wf == nil, "a workflow unless the YAML is unreadable")
			require.Len(t, problems, 1, "%+v", problems)
			p := problems[0]
			require.Equal(t, tc.rule, p.Rule, p.Message)
			require.Equal(t, [2]int{tc.line, tc.col}, [2]int{p.Line, p.Column}, p.Message)
			require.NotEmpty(t, p.Message)
			require.True(t, strings.Contains(p.Hint, tc.hint), "hint %q lacks %q", p.Hint, tc.hint)
		})
	}
}

// TestPermissionsAreAccepted: the one key kept without effect (the platform has no token).
func TestPermissionsAreAccepted(t *testing.T) {
	t.Parallel()
	src := "name: t\non: workflow_dispatch\npermissions: {contents: read}\njobs:\n  a:\n    runs-on: any\n    permissions: {}\n" +
		"    steps:\n      - uses: ./skills/demo_llm\n        with: {prompt: hi}\n"
	_, problems := workflow.Parse([]byte(src), catalogue(t))
	require.Empty(t, problems)
}

// workflow200 is a workflow of 200 jobs (a chain of 100 and a fan-out of 100 joined by
// the last), the size the issue measures.
func workflow200() []byte {
	var sb strings.Builder
	sb.WriteString("name: big\non:\n  workflow_dispatch:\n    inputs:\n      topic: {type: string, required: true}\njobs:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  j%d:\n    runs-on: any\n", i)
		switch {
		case i > 0 && i < 100:
			fmt.Fprintf(&sb, "    needs: j%d\n", i-1)
		case i >= 100:
			sb.WriteString("    needs: j99\n")
		}
		fmt.Fprintf(&sb, "    outputs:\n      text: ${{ steps.s.outputs.result }}\n    steps:\n      - id: s\n        uses: ./skills/demo_llm\n"+
			"        with:\n          prompt: \"Step %d on ${{ inputs.topic }}\"\n", i)
	}
	return []byte(sb.String())
}

var opts200 = workflow.Options{RunnerLabels: []string{"default"}, KnownSkill: func(string) bool { return true }}

// parsed200 is workflow200 parsed and compiled, and its chain definition as the
// coordinator stores it.
func parsed200(b *testing.B) (*workflow.Workflow, *chain.Definition, []byte) {
	wf, problems := workflow.Parse(workflow200(), opts200)
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	def, errs := workflow.Compile(wf, json.RawMessage(`{"topic":"bench"}`))
	if errs != nil {
		b.Fatal(errs)
	}
	stored, err := json.Marshal(def)
	if err != nil {
		b.Fatal(err)
	}
	return wf, def, stored
}

// BenchmarkParse200Jobs: parse and validate a workflow of 200 jobs (actionlint's checks
// and the platform's).
func BenchmarkParse200Jobs(b *testing.B) {
	src := workflow200()
	if _, problems := workflow.Parse(src, opts200); len(problems) > 0 {
		b.Fatal(problems)
	}
	b.ReportAllocs()
	for b.Loop() {
		workflow.Parse(src, opts200)
	}
}

// BenchmarkCompile200Jobs: compile the parsed 200-job workflow with a run's inputs into
// its chain definition (once per run).
func BenchmarkCompile200Jobs(b *testing.B) {
	wf, _, _ := parsed200(b)
	in := json.RawMessage(`{"topic":"bench"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := workflow.Compile(wf, in); errs != nil {
			b.Fatal(errs)
		}
	}
}

// BenchmarkNewRules200Jobs: decode the 200-job plan into its Rules, as the coordinator
// does on every transition of the workflow's chain.
func BenchmarkNewRules200Jobs(b *testing.B) {
	_, def, _ := parsed200(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := workflow.NewRules(def); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode200Jobs: what the coordinator decodes of a 200-job workflow's chain on
// every transition: the stored definition (chain.Parse) and then its Rules.
func BenchmarkDecode200Jobs(b *testing.B) {
	_, _, stored := parsed200(b)
	b.ReportAllocs()
	for b.Loop() {
		def, errs := chain.Parse(stored, nil)
		if errs != nil {
			b.Fatal(errs)
		}
		if _, err := workflow.NewRules(def); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(stored)), "def-bytes")
}
