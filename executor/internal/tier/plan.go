package tier

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// planStep is one step of an autonomous agent's plan, as the planner (or an adjusting
// reflection) writes it.
type planStep struct {
	StepID          string   `json:"step_id"`
	Description     string   `json:"description"`
	ExecutionType   string   `json:"execution_type"`
	Tools           []string `json:"tools,omitempty"`
	SuccessCriteria criteria `json:"success_criteria"`
	DependsOn       []string `json:"depends_on,omitempty"`
}

// criteria is a step's success criteria: a list of sentences, or one sentence.
type criteria []string

func (c *criteria) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*c = criteria{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("success_criteria must be a list of strings")
	}
	*c = many
	return nil
}

// planAnswer is the planner's answer.
type planAnswer struct {
	Reasoning string     `json:"reasoning"`
	Steps     []planStep `json:"steps"`
}

// The JSON schemas sent as response_format; the answers are checked in full by parsePlan
// and friends whether or not the provider enforced them.
var (
	stepSchema = `{"type":"object","properties":{` +
		`"step_id":{"type":"string"},"description":{"type":"string"},` +
		`"execution_type":{"type":"string","enum":["llm_only","tool_using"]},` +
		`"tools":{"type":"array","items":{"type":"string"}},` +
		`"success_criteria":{"type":"array","items":{"type":"string"}},` +
		`"depends_on":{"type":"array","items":{"type":"string"}}},` +
		`"required":["step_id","description","execution_type","success_criteria"]}`
	planSchema = json.RawMessage(`{"type":"object","properties":{"reasoning":{"type":"string"},"steps":{"type":"array","items":` +
		stepSchema + `}},"required":["steps"]}`)
	reflectionSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"verdict":{"type":"string","enum":["pass","adjust","replan","fail"]},` +
		`"reasoning":{"type":"string"},"summary":{"type":"string"},` +
		`"steps":{"type":"array","items":` + stepSchema + `}},"required":["verdict","reasoning"]}`)
	evaluationSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"goal_achieved":{"type":"boolean"},"reasoning":{"type":"string"},"answer":{"type":"string"}},` +
		`"required":["goal_achieved","reasoning","answer"]}`)
)

// Examples of each answer, shown to the model when an answer could not be used.
const (
	planExample = `{"reasoning":"the price must be found before it can be summarised","steps":[{"step_id":"s1","description":"Find the current price","execution_type":"tool_using",` +
		`"tools":["lookup"],"success_criteria":["the price is known"],"depends_on":[]},` +
		`{"step_id":"s2","description":"Summarise it","execution_type":"llm_only","tools":[],` +
		`"success_criteria":["one paragraph"],"depends_on":["s1"]}]}`
	reflectionExample = `{"verdict":"pass","reasoning":"the tool returned the price, which meets the criterion",` +
		`"summary":"the price is 42 EUR","steps":[]}`
	evaluationExample = `{"goal_achieved":true,"reasoning":"every step met its criteria","answer":"The price is 42 EUR."}`
)

// decodeAnswer reads a JSON answer, forgiving a Markdown code fence around it.
func decodeAnswer(content string, v any) error {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	if s == "" {
		return fmt.Errorf("the answer is empty")
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("the answer is not the JSON object asked for (%v)", err)
	}
	return nil
}

// checkSteps validates steps given the ids of the steps already executed and the tools the
// agent may use, and returns them in an order that respects depends_on (the given order
// wherever the dependencies allow). Each problem is a sentence for the model to act on.
// empty allows an empty list (an adjustment that drops the remaining steps).
func checkSteps(steps []planStep, done []string, tools []string, empty bool) ([]planStep, []string) {
	var problems []string
	if len(steps) == 0 && !empty {
		problems = append(problems, "the plan has no steps; give at least one")
	}
	ids := map[string]bool{}
	for i, s := range steps {
		at := fmt.Sprintf("step %d", i+1)
		if s.StepID != "" {
			at = fmt.Sprintf("step %q", s.StepID)
		}
		switch {
		case strings.TrimSpace(s.StepID) == "":
			problems = append(problems, at+" has no step_id")
		case ids[s.StepID]:
			problems = append(problems, at+": step_id is used twice")
		case slices.Contains(done, s.StepID):
			problems = append(problems, at+": step_id is the id of a step already executed; give new steps new ids")
		}
		ids[s.StepID] = true
		if strings.TrimSpace(s.Description) == "" {
			problems = append(problems, at+" has no description")
		}
		switch s.ExecutionType {
		case "llm_only":
		case "tool_using":
			if len(s.Tools) == 0 {
				problems = append(problems, at+" is tool_using but lists no tools")
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: execution_type must be llm_only or tool_using, not %q", at, s.ExecutionType))
		}
		for _, t := range s.Tools {
			if !slices.Contains(tools, t) {
				problems = append(problems, fmt.Sprintf("%s: tool %q is not available; the tools are %v", at, t, tools))
			}
		}
	}
	for _, s := range steps {
		for _, d := range s.DependsOn {
			if d == s.StepID || (!ids[d] && !slices.Contains(done, d)) {
				problems = append(problems, fmt.Sprintf("step %q depends on %q, which is not another step of the plan", s.StepID, d))
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	// Kahn's algorithm, always taking the first ready step in the given order.
	placed := map[string]bool{}
	for _, d := range done {
		placed[d] = true
	}
	out := make([]planStep, 0, len(steps))
	for len(out) < len(steps) {
		progressed := false
		for _, s := range steps {
			if placed[s.StepID] {
				continue
			}
			if !slices.ContainsFunc(s.DependsOn, func(d string) bool { return !placed[d] }) {
				out, placed[s.StepID], progressed = append(out, s), true, true
				break
			}
		}
		if !progressed {
			return nil, []string{"the steps' depends_on form a cycle; a step may depend only on steps that can run before it"}
		}
	}
	return out, nil
}

// stepIDs lists the steps' ids.
func stepIDs(steps []planStep) []string {
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.StepID
	}
	return ids
}
