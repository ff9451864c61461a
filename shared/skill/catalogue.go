package skill

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadDir reads every *.yaml and *.yml file of dir, each holding one binding, sorted by job
// type. Unknown fields are errors, so a typo never silently drops a setting.
func LoadDir(dir string) ([]Skill, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading skill catalogue: %w", err)
	}
	var skills []Skill
	seen := map[string]string{}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		s, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev, dup := seen[s.JobType]; dup {
			return nil, fmt.Errorf("%s: job_type %q is also defined in %s", path, s.JobType, prev)
		}
		seen[s.JobType] = path
		skills = append(skills, s)
	}
	slices.SortFunc(skills, func(a, b Skill) int { return strings.Compare(a.JobType, b.JobType) })
	return skills, nil
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
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
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
	s.Defaults()
	return s, nil
}
