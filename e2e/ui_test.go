package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUI runs the browser tests of web/tests/run.mjs (headless Debian Chromium driven by
// playwright-core) against a whole stack serving the built UI. It runs from web/ with
// `npm test`, which builds the UI first and sets SWITCHYARD_UI_TESTS=1; a plain `go test`
// skips it, so `make test` runs it once.
func TestUI(t *testing.T) {
	if os.Getenv("SWITCHYARD_UI_TESTS") != "1" {
		t.Skip("the browser tests run from web/ with `npm test` (SWITCHYARD_UI_TESTS=1)")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dist := filepath.Join(root, "web", "dist")
	_, err = os.Stat(filepath.Join(dist, "index.html"))
	require.NoError(t, err, "build the UI first: cd web && npm run build")

	// Every LLM call takes a visible moment, so a ReAct run's tree grows while it is watched.
	// setupExec also starts the demo tool and installs the catalogue's tools (demo_react's).
	s := setupExec(t, execOptions{StackOptions: StackOptions{
		SimArgs:  []string{"--default-latency", "constant:400ms"},
		ExtraEnv: []string{"SWITCHYARD_WEB_DIR=" + dist},
	}}).Stack
	otherKeyFile := filepath.Join(t.TempDir(), "other.key")
	operatorKeyFile := filepath.Join(t.TempDir(), "operator.key")
	s.runOnce("dispatcher", "bootstrap", "--org", "other-org", "--key-file", otherKeyFile,
		"--operator-key-file", operatorKeyFile,
		"--skills", filepath.Join(root, "skills"), "--sim-url", s.SimURL+"/v1")
	otherKey, err := os.ReadFile(otherKeyFile)
	require.NoError(t, err)
	operatorKey, err := os.ReadFile(operatorKeyFile)
	require.NoError(t, err)

	cmd := exec.Command("node", filepath.Join("tests", "run.mjs"), s.DispatchURL)
	cmd.Dir = filepath.Join(root, "web")
	// Keys go in the environment, not argv, where any process listing would show them.
	cmd.Env = append(os.Environ(), "SWITCHYARD_UI_ADMIN_KEY="+s.AdminKey,
		"SWITCHYARD_UI_OTHER_KEY="+strings.TrimSpace(string(otherKey)),
		// The operator's first hour (tests/journey.mjs) creates an organisation with it.
		"SWITCHYARD_UI_OPERATOR_KEY="+strings.TrimSpace(string(operatorKey)),
		// The autonomous tests (tests/autonomous.mjs) post their sim-llm scripts here.
		"SWITCHYARD_UI_SIM_URL="+s.SimURL)
	out, err := cmd.CombinedOutput()
	t.Logf("browser tests:\n%s", out)
	require.NoError(t, err, "browser tests failed; screenshots in web/test-artifacts/")
}
