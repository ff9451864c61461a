package skill

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchyard-ai/switchyard/shared/catalogue"
)

// Workflows in workflows/ are chain skills written in GitHub Actions syntax: each file is
// the skill whose job type is the file's name without its extension, its description the
// workflow's name, its definition the file as written (the dispatcher parses and checks
// it; here it is only read).

var workflowJobType = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)

// LoadWorkflowDir reads every *.yaml and *.yml file of dir as a workflow skill, sorted by
// job type.
func LoadWorkflowDir(dir string) ([]Skill, error) {
	return catalogue.LoadFiles(dir, "workflow", WorkflowSkill, func(s Skill) string { return s.JobType })
}

// WorkflowSkill is the chain skill of a workflow file at path.
func WorkflowSkill(path string, src []byte) (Skill, error) {
	jobType := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if !workflowJobType.MatchString(jobType) {
		return Skill{}, fmt.Errorf("the file name %q is the workflow's job type: use lower-case letters, digits, _ . and -, starting with a letter", jobType)
	}
	var head struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(src, &head); err != nil {
		return Skill{}, fmt.Errorf("parsing workflow: %w", err)
	}
	s := Skill{JobType: jobType, Enabled: true, ExecutionType: "chain", Description: head.Name, Workflow: string(src)}
	s.Defaults()
	return s, nil
}
