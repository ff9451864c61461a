package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadDir reads every *.yaml and *.yml file of dir, each holding one tool, sorted by name.
// Unknown fields are errors, so a typo never silently drops a setting. Install each result
// to register it.
func LoadDir(dir string) ([]Tool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading tool catalogue: %w", err)
	}
	var tools []Tool
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
		t, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev, dup := seen[t.Name]; dup {
			return nil, fmt.Errorf("%s: tool %q is also defined in %s", path, t.Name, prev)
		}
		seen[t.Name] = path
		tools = append(tools, t)
	}
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools, nil
}

// yamlTool is the file form: the definition plus its parameters as a YAML tree.
type yamlTool struct {
	Tool       `yaml:",inline"`
	Parameters any `yaml:"parameters"`
}

// Parse reads one tool from YAML and checks it.
func Parse(b []byte) (Tool, error) {
	var y yamlTool
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
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
