package skill_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/catalogue"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
}

func TestLoadDirAppliesDefaultsAndSorts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "b.yaml", "job_type: b_job\nexecution_type: llm_only\n")
	write(t, dir, "a.yml", "job_type: a_job\nexecution_type: chain\nchain:\n  steps: [{id: one}]\n")
	write(t, dir, "notes.txt", "ignored")
	skills, err := skill.LoadDir(dir)
	require.NoError(t, err)
	require.Len(t, skills, 2)
	require.Equal(t, "a_job", skills[0].JobType)
	require.JSONEq(t, `{"steps":[{"id":"one"}]}`, string(skills[0].Chain))
	b := skills[1]
	require.True(t, b.Enabled, "enabled unless the file says otherwise")
	require.Equal(t, "default", b.Queue)
	require.Equal(t, "minimal", b.RiskLevel)
	require.Equal(t, "any", b.DataResidency)
	require.Equal(t, 5, b.MaxIterations)
	require.Equal(t, 3, *b.MaxRetries)
}

func TestLoadDirRefusesTyposAndDuplicates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "a.yaml", "job_type: a_job\nexecution_type: llm_only\nrisk_levle: high\n")
	_, err := skill.LoadDir(dir)
	require.ErrorContains(t, err, "risk_levle")

	dir = t.TempDir()
	write(t, dir, "a.yaml", "job_type: same\nexecution_type: llm_only\n")
	write(t, dir, "b.yaml", "job_type: same\nexecution_type: llm_only\n")
	_, err = skill.LoadDir(dir)
	require.ErrorContains(t, err, `skill "same" is also defined in`)

	_, err = skill.Parse([]byte("description: no job type\n"))
	require.ErrorContains(t, err, "job_type is required")
}

func TestTheCatalogueLoads(t *testing.T) {
	t.Parallel()
	skills, err := skill.LoadDir(filepath.Join("..", "..", "skills"))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, s := range skills {
		names[s.JobType] = true
	}
	for _, want := range []string{"demo_llm", "demo_react", "demo_high_risk", "demo_critical", "demo_eu_only", "demo_autonomous",
		"demo_compete", "demo_critic"} {
		require.True(t, names[want], want)
	}
	for _, s := range skills {
		if s.JobType == "demo_autonomous" {
			cfg, problems := skill.ParseAutonomous(s.Autonomous, s.Tools)
			require.Empty(t, problems)
			require.True(t, cfg.NeedsApproval("create_ticket"))
			require.False(t, cfg.NeedsApproval("demo_weather"))
		}
		if s.JobType == "demo_compete" || s.JobType == "demo_critic" {
			cfg, problems := skill.ParseAutonomous(s.Autonomous, s.Tools)
			require.Empty(t, problems, s.JobType)
			require.Equal(t, strings.TrimPrefix(s.JobType, "demo_"), cfg.AgentPattern)
		}
	}
}

// TestYAMLErrorsSpeakTheFilesTerms: every misfit is reported with its line and field and
// what it must be, never a Go type ("cannot unmarshal !!str into int", "skill.yamlSkill").
func TestYAMLErrorsSpeakTheFilesTerms(t *testing.T) {
	t.Parallel()
	_, err := skill.Parse([]byte("job_type: a\nexecution_type: llm_only\nmax_tokens: lots\ntemperature: [1]\n" +
		"tools: demo\nenabled: maybe\ncolour: red\n"))
	var fe *catalogue.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 3, fe.Line)
	require.Equal(t, "parsing skill: 5 problems:\n"+
		"  line 3: max_tokens must be a whole number, not the string \"lots\"\n"+
		"  line 4: temperature must be a number, not a list\n"+
		"  line 5: tools must be a list of strings, not the string \"demo\"\n"+
		"  line 6: enabled must be true or false, not the string \"maybe\"\n"+
		"  line 7: colour is not a known field; the fields are autonomous, chain, cost_ceiling_usd, data_residency, "+
		"description, enabled, execution_type, job_type, max_iterations, max_retries, max_tokens, model_override, "+
		"queue, requires_approval, risk_level, routing_hint, system_prompt, temperature, timeout_seconds, tools", err.Error())
	for _, goTerm := range []string{"yamlSkill", "!!", "unmarshal", "into", "float64", "[]string", "bool"} {
		require.NotContains(t, err.Error(), goTerm)
	}

	_, err = skill.Parse([]byte("- a\n- b\n"))
	require.EqualError(t, err, "parsing skill: line 1: the file must be a mapping of fields (name: value), not a list")
	_, err = skill.Parse([]byte("job_type: a\njob_type: b\n"))
	require.EqualError(t, err, `parsing skill: line 2: mapping key "job_type" already defined at line 1`)
	_, err = skill.Parse([]byte("job_type: a\n  bad: indent\n"))
	require.EqualError(t, err, "parsing skill: line 2: mapping values are not allowed in this context")
}
