package client_test

import (
	"os"
	"strings"
	"testing"
)

// TestModuleStandsAlone: a plugin service adds the client with one `go get`, which ignores
// replace directives and cannot fetch the repository's other modules at v0.0.0 — so the
// client's go.mod may require none of them, nor replace anything.
func TestModuleStandsAlone(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "replace" {
			t.Errorf("go.mod:%d: %q: the client module replaces nothing", i+1, line)
		}
		for _, w := range f {
			if strings.HasPrefix(w, "github.com/switchyard-ai/switchyard") && w != "github.com/switchyard-ai/switchyard/client" {
				t.Errorf("go.mod:%d: %q: the client module requires no other module of the repository", i+1, line)
			}
		}
	}
}
