// Package catalogue reads a directory of YAML definitions — skills/, tools/ — one
// definition a file, strictly: unknown fields are errors, so a typo never silently drops a
// setting, and two files defining the same name are an error naming both.
package catalogue

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

// LoadDir parses every *.yaml and *.yml file of dir with parse and returns the results
// sorted by name. kind names the definitions in errors ("skill", "tool").
func LoadDir[T any](dir, kind string, parse func([]byte) (T, error), name func(T) string) ([]T, error) {
	return LoadFiles(dir, kind, func(_ string, b []byte) (T, error) { return parse(b) }, name)
}

// LoadFiles is LoadDir for definitions that take something from the file's path (a
// workflow's job type is its file name).
func LoadFiles[T any](dir, kind string, parse func(path string, b []byte) (T, error), name func(T) string) ([]T, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s catalogue: %w", kind, err)
	}
	var out []T
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
		v, err := parse(path, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev, dup := seen[name(v)]; dup {
			return nil, fmt.Errorf("%s: %s %q is also defined in %s", path, kind, name(v), prev)
		}
		seen[name(v)] = path
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	return out, nil
}

// Decode reads one YAML document into dst, refusing unknown fields. An empty document
// leaves dst as it is. Errors name the line, the field and what it must be (FieldError),
// joined when there are several.
func Decode(b []byte, dst any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
		return explain(b, dst, err)
	}
	return nil
}
