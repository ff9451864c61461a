package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// corpusEnv names a folder of conformance cases to run instead of the default.
const corpusEnv = "SWITCHYARD_EXPR_CORPUS"

// corpusDir is $SWITCHYARD_EXPR_CORPUS, or ../shared/conformance/gha-expressions beside the
// repository (found from this package's directory by its go.work).
func corpusDir(t *testing.T) string {
	if dir := os.Getenv(corpusEnv); dir != "" {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, "..", "shared", "conformance", "gha-expressions")
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("conformance: no go.work above %s to find the default corpus from; set %s to the folder of cases", wd, corpusEnv)
		}
	}
}

type conformanceCase struct {
	Expr     string          `json:"expr"`
	Contexts json.RawMessage `json:"contexts"`
	Result   *struct {
		Kind  string          `json:"kind"`
		Value json.RawMessage `json:"value"`
	} `json:"result"`
	Err *struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	} `json:"err"`
}

// TestConformance runs GitHub's cross-implementation expression cases (see the README in
// the corpus folder) through Parse and Eval: every case must pass. `make conformance` runs it
// alone and shows its summary.
func TestConformance(t *testing.T) {
	dir := corpusDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("conformance: no *.json cases in %s (the folder is missing or empty; set %s to the folder of cases)", dir, corpusEnv)
	}
	sort.Strings(files)
	passed, failed, wording := 0, 0, 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var groups map[string][]conformanceCase
		if err := json.Unmarshal(raw, &groups); err != nil {
			t.Fatalf("conformance: %s: %v", file, err)
		}
		names := make([]string, 0, len(groups))
		for g := range groups {
			names = append(names, g)
		}
		sort.Strings(names)
		for _, g := range names {
			for _, c := range groups[g] {
				problem, note := runCase(c)
				if problem != "" {
					failed++
					t.Errorf("FAIL %s / %s / %q: %s", filepath.Base(file), g, c.Expr, problem)
					continue
				}
				passed++
				if note != "" {
					wording++
					t.Logf("wording %s / %s / %q: %s", filepath.Base(file), g, c.Expr, note)
				}
			}
		}
	}
	fmt.Printf("conformance: %d passed, %d failed (%s)\n", passed, failed, dir)
	if wording > 0 {
		fmt.Printf("conformance: %d expected errors of the right kind worded otherwise than GitHub's\n", wording)
	}
}

// runCase returns what is wrong ("" when the case passes) and a note when an expected
// error came with other words than GitHub's (cases match on the kind only).
func runCase(c conformanceCase) (problem, note string) {
	var names []string
	named := map[string]any{}
	if len(c.Contexts) > 0 {
		v, err := fromJSON(string(c.Contexts))
		if err != nil {
			return "bad contexts: " + err.Error(), ""
		}
		obj, ok := v.(*object)
		if !ok {
			return "contexts is not an object", ""
		}
		for i, k := range obj.keys {
			names = append(names, k)
			named[k] = obj.vals[i] // ordered objects, so toJSON prints the case's key order
		}
	}
	e, err := Parse(c.Expr, names)
	var got any
	if err == nil {
		got, err = e.Eval(Context{Named: named})
	}
	if c.Err != nil {
		ee, ok := err.(*Error)
		if !ok {
			return fmt.Sprintf("want a %s error, got %s", c.Err.Kind, describe(got)), ""
		}
		kind := ee.Kind
		if ee.Lexical {
			kind = "lexing"
		}
		if kind != c.Err.Kind {
			return fmt.Sprintf("want a %s error, got a %s error: %s", c.Err.Kind, kind, ee.Message), ""
		}
		if !strings.Contains(ee.Message, c.Err.Value) {
			return "", fmt.Sprintf("want %q, got %q", c.Err.Value, ee.Message)
		}
		return "", ""
	}
	if err != nil {
		return fmt.Sprintf("want %s %s, got error %v", c.Result.Kind, c.Result.Value, err), ""
	}
	if k := externalKind(got); k != c.Result.Kind {
		return fmt.Sprintf("want %s %s, got %s", c.Result.Kind, c.Result.Value, describe(got)), ""
	}
	var want any
	if err := json.Unmarshal(c.Result.Value, &want); err != nil {
		return "bad result: " + err.Error(), ""
	}
	if !sameValue(want, got) {
		return fmt.Sprintf("want %s %s, got %s", c.Result.Kind, c.Result.Value, describe(got)), ""
	}
	return "", ""
}

func externalKind(v any) string {
	switch v.(type) {
	case []any:
		return "Array"
	case map[string]any:
		return "Object"
	}
	return kindName(v)
}

func sameValue(want, got any) bool {
	if w, ok := want.(float64); ok {
		g, ok := got.(float64)
		return ok && (w == g || (math.IsNaN(w) && math.IsNaN(g)))
	}
	return reflect.DeepEqual(want, got)
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%s %v", externalKind(v), v)
	}
	return externalKind(v) + " " + string(b)
}
