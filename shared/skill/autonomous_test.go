package skill_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/skill"
)

func TestAutonomousDefaults(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "null", "{}"} {
		a, problems := skill.ParseAutonomous(json.RawMessage(raw), nil)
		require.Empty(t, problems, raw)
		require.Equal(t, 20, a.MaxSteps)
		require.Equal(t, 3, a.Replans())
		require.Equal(t, "execute", a.AgentPattern)
		require.Zero(t, a.ApprovalTimeoutDuration())
	}
	a, problems := skill.ParseAutonomous(json.RawMessage(`{"max_steps":7,"max_replans":0,
		"require_approval_for":["deploy"],"approval_timeout":"72h","planner_prompt":"plan well"}`), []string{"search", "deploy"})
	require.Empty(t, problems)
	require.Equal(t, 7, a.MaxSteps)
	require.Equal(t, 0, a.Replans(), "0 replans is a setting, not a missing one")
	require.True(t, a.NeedsApproval("deploy"))
	require.False(t, a.NeedsApproval("search"))
	require.Equal(t, 72*time.Hour, a.ApprovalTimeoutDuration())
	require.Equal(t, "plan well", a.PlannerPrompt)
}

// TestAutonomousProblemsNameTheirField: every problem of the block is reported at once,
// named by its JSON path.
func TestAutonomousProblemsNameTheirField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want map[string]string // field -> rule
	}{
		{`{"max_steps":0,"max_replans":101,"require_approval_for":["search","rm"],"approval_timeout":"721h","agent_pattern":"swarm"}`,
			map[string]string{"autonomous.max_replans": "range", "autonomous.require_approval_for[1]": "subset",
				"autonomous.approval_timeout": "range", "autonomous.agent_pattern": "oneof"}},
		{`{"max_steps":-1}`, map[string]string{"autonomous.max_steps": "range"}},
		{`{"approval_timeout":"3 days"}`, map[string]string{"autonomous.approval_timeout": "duration"}},
		{`{"max_steps":"many"}`, map[string]string{"autonomous.max_steps": "type"}},
		{`{"require_approval_for":"search"}`, map[string]string{"autonomous.require_approval_for": "type"}},
		{`{"max_stepz":3}`, map[string]string{"autonomous.max_stepz": "unknown"}},
		{`[1]`, map[string]string{"autonomous": "json"}},
		{`{} {}`, map[string]string{"autonomous": "json"}},
	} {
		_, problems := skill.ParseAutonomous(json.RawMessage(tc.raw), []string{"search"})
		got := map[string]string{}
		for _, p := range problems {
			got[p.Field] = p.Rule
			require.NotContains(t, p.Message, "json:", "the decoder's words stay out")
			require.NotContains(t, p.Message, "Go struct")
		}
		require.Equal(t, tc.want, got, tc.raw)
	}
}

func TestCatalogueRefusesABadAutonomousBlock(t *testing.T) {
	t.Parallel()
	_, err := skill.Parse([]byte("job_type: a\nexecution_type: autonomous\ntools: [x]\nautonomous:\n  require_approval_for: [y]\n"))
	require.ErrorContains(t, err, `autonomous.require_approval_for[0] "y" is not one of the skill's tools`)
	s, err := skill.Parse([]byte("job_type: a\nexecution_type: autonomous\ntools: [x]\nautonomous:\n  max_steps: 4\n"))
	require.NoError(t, err)
	require.JSONEq(t, `{"max_steps":4}`, string(s.Autonomous))
}

// TestAutonomousPatterns: each pattern's fields get their defaults, and a field of another
// pattern, a count out of range or a specialist's tool the skill lacks is a problem naming
// its field.
func TestAutonomousPatterns(t *testing.T) {
	t.Parallel()
	a, problems := skill.ParseAutonomous(json.RawMessage(`{"agent_pattern":"compete"}`), nil)
	require.Empty(t, problems)
	require.Equal(t, 3, a.Agents)
	require.Equal(t, 3, a.AgentCount())
	a, problems = skill.ParseAutonomous(json.RawMessage(`{"agent_pattern":"self_consistent","agents":5,
		"temperatures":[0.1,0.9],"prompts":["be terse"],"judge_prompt":"pick"}`), nil)
	require.Empty(t, problems)
	require.Equal(t, []float64{0.1, 0.9}, a.Temperatures)
	a, problems = skill.ParseAutonomous(json.RawMessage(`{"agent_pattern":"critic","critic_prompt":"be harsh"}`), nil)
	require.Empty(t, problems)
	require.Equal(t, 2, a.Rounds)
	require.Equal(t, 5, a.AgentCount(), "a generator, then a critic and a reviser per round")
	a, problems = skill.ParseAutonomous(json.RawMessage(`{"agent_pattern":"collaborate","coordinator_prompt":"merge",
		"specialists":[{"role":"researcher","prompt":"find","tools":["search"]},{"role":"writer","prompt":"write"}]}`),
		[]string{"search"})
	require.Empty(t, problems)
	require.Equal(t, 2, a.AgentCount())
	require.Equal(t, []string{"search"}, a.Specialists[0].Tools)
	a, problems = skill.ParseAutonomous(nil, nil)
	require.Empty(t, problems)
	require.Zero(t, a.Agents, "execute has no agents field")
	require.Equal(t, 1, a.AgentCount())

	for _, tc := range []struct {
		raw  string
		want map[string]string
	}{
		{`{"agent_pattern":"compete","agents":11,"rounds":3,"temperatures":[0.5]}`,
			map[string]string{"autonomous.agents": "range", "autonomous.rounds": "pattern", "autonomous.temperatures": "pattern"}},
		{`{"agent_pattern":"self_consistent","agents":2,"temperatures":[0.1,2.5,0.3],"prompts":[""]}`,
			map[string]string{"autonomous.temperatures": "max", "autonomous.temperatures[1]": "range", "autonomous.prompts[0]": "range"}},
		{`{"agents":3,"judge_prompt":"x"}`,
			map[string]string{"autonomous.agents": "pattern", "autonomous.judge_prompt": "pattern"}},
		{`{"agent_pattern":"critic","rounds":11,"critic_prompt":"x","coordinator_prompt":"y"}`,
			map[string]string{"autonomous.rounds": "range", "autonomous.coordinator_prompt": "pattern"}},
		{`{"agent_pattern":"collaborate"}`, map[string]string{"autonomous.specialists": "required"}},
		{`{"agent_pattern":"collaborate","specialists":[{"role":"a","prompt":"p","tools":["search","rm"]},{"role":"a","prompt":""}]}`,
			map[string]string{"autonomous.specialists[0].tools[1]": "subset", "autonomous.specialists[1].role": "unique",
				"autonomous.specialists[1].prompt": "range"}},
		{`{"agent_pattern":"collaborate","specialists":[{"role":"a","prompt":"p"}]}`,
			map[string]string{"autonomous.specialists": "range"}},
		{`{"temperatures":["hot"]}`, map[string]string{"autonomous.temperatures": "type"}},
	} {
		_, problems := skill.ParseAutonomous(json.RawMessage(tc.raw), []string{"search"})
		got := map[string]string{}
		for _, p := range problems {
			got[p.Field] = p.Rule
		}
		require.Equal(t, tc.want, got, tc.raw)
	}
}
