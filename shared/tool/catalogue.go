package tool

import (
	"encoding/json"
	"fmt"

	"github.com/switchyard-ai/switchyard/shared/catalogue"
)

// LoadDir reads every *.yaml and *.yml file of dir, each holding one tool, sorted by name.
// Unknown fields are errors, so a typo never silently drops a setting. Install each result
// to register it.
func LoadDir(dir string) ([]Tool, error) {
	return catalogue.LoadDir(dir, "tool", Parse, func(t Tool) string { return t.Name })
}

// yamlTool is the file form: the definition plus its parameters as a YAML tree.
type yamlTool struct {
	Tool       `yaml:",inline"`
	Parameters any `yaml:"parameters"`
}

// Parse reads one tool from YAML and checks it.
func Parse(b []byte) (Tool, error) {
	var y yamlTool
	if err := catalogue.Decode(b, &y); err != nil {
		return Tool{}, fmt.Errorf("parsing tool: %w", err)
	}
	t := y.Tool
	if y.Parameters != nil {
		raw, err := json.Marshal(y.Parameters)
		if err != nil {
			return Tool{}, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
		}
		t.Parameters = raw
	}
	t.Defaults()
	if err := t.Check(); err != nil {
		return Tool{}, err
	}
	return t, nil
}
