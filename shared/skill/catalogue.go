package skill

import (
	"errors"
	"fmt"

	"github.com/switchyard-ai/switchyard/shared/catalogue"
)

// LoadDir reads every *.yaml and *.yml file of dir, each holding one binding, sorted by job
// type. Unknown fields are errors, so a typo never silently drops a setting.
func LoadDir(dir string) ([]Skill, error) {
	return catalogue.LoadDir(dir, "skill", Parse, func(s Skill) string { return s.JobType })
}

// yamlSkill is the file form: the binding plus chain and autonomous settings as YAML trees.
type yamlSkill struct {
	Skill      `yaml:",inline"`
	Chain      any `yaml:"chain"`
	Autonomous any `yaml:"autonomous"`
}

// Parse reads one binding from YAML. Enabled defaults to true.
func Parse(b []byte) (Skill, error) {
	y := yamlSkill{Skill: Skill{Enabled: true}}
	if err := catalogue.Decode(b, &y); err != nil {
		return Skill{}, fmt.Errorf("parsing skill: %w", err)
	}
	if y.JobType == "" {
		return Skill{}, errors.New("parsing skill: job_type is required")
	}
	s := y.Skill
	var err error
	if s.Chain, err = toJSON(y.Chain); err != nil {
		return Skill{}, fmt.Errorf("chain: %w", err)
	}
	if s.Autonomous, err = toJSON(y.Autonomous); err != nil {
		return Skill{}, fmt.Errorf("autonomous: %w", err)
	}
	if s.ExecutionType == "autonomous" {
		if _, problems := ParseAutonomous(s.Autonomous, s.Tools); len(problems) > 0 {
			return Skill{}, fmt.Errorf("parsing skill: %s %s", problems[0].Field, problems[0].Message)
		}
	}
	s.Defaults()
	return s, nil
}
