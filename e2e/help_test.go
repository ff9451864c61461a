package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelp runs every service binary with -h, --help and help, and each subcommand with
// --help, in an empty environment (no database to reach): each prints its usage and exits
// 0. An unknown command exits 2 and points at --help.
func TestHelp(t *testing.T) {
	t.Parallel()
	run := func(bin string, args ...string) (int, string) {
		cmd := exec.Command(filepath.Join(binDir, bin), args...)
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String()
		}
		require.NoError(t, err)
		return 0, out.String()
	}
	for _, bin := range []string{"dispatcher", "provider-router", "executor", "executor-gpu", "sim-llm"} {
		for _, flag := range []string{"-h", "--help", "help"} {
			if bin == "sim-llm" && flag == "help" {
				continue // sim-llm takes flags only
			}
			code, out := run(bin, flag)
			require.Equal(t, 0, code, "%s %s: %s", bin, flag, out)
			require.Contains(t, strings.ToLower(out), "usage", "%s %s", bin, flag)
		}
	}
	for _, args := range [][]string{
		{"dispatcher", "bootstrap", "--help"},
		{"provider-router", "certs", "--help"},
		{"provider-router", "credentials", "keygen", "--help"},
		{"provider-router", "credentials", "set", "--help"},
	} {
		code, out := run(args[0], args[1:]...)
		require.Equal(t, 0, code, "%v: %s", args, out)
		require.Contains(t, out, "-", "%v prints its flags: %s", args, out)
	}
	for _, bin := range []string{"dispatcher", "provider-router", "executor"} {
		code, out := run(bin, "no-such-command")
		require.Equal(t, 2, code, "%s no-such-command: %s", bin, out)
		require.Contains(t, out, bin+" --help", "%s points at --help: %s", bin, out)
	}
}
