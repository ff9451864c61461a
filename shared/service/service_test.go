package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	called := false
	fn := func(_ context.Context, args []string) error {
		called = true
		switch args[0] {
		case "ok":
			return nil
		case "sub-help":
			return fmt.Errorf("parsing: %w", flag.ErrHelp)
		case "bad":
			return Usagef("unknown command %q", args[0])
		}
		return errors.New("boom")
	}
	for _, tc := range []struct {
		arg     string
		code    int
		stdout  string
		stderr  string
		callsFn bool
	}{
		{"--help", 0, "Usage: x\n", "", false},
		{"-h", 0, "Usage: x\n", "", false},
		{"help", 0, "Usage: x\n", "", false},
		{"ok", 0, "", "", true},
		{"sub-help", 0, "", "", true},
		{"bad", 2, "", "x: unknown command \"bad\"\nRun 'x --help' for usage.\n", true},
		{"fail", 1, "", "x: boom\n", true},
	} {
		called = false
		var out, errOut bytes.Buffer
		code := run(context.Background(), "x", "\nUsage: x\n", []string{tc.arg}, &out, &errOut, fn)
		require.Equal(t, tc.code, code, tc.arg)
		require.Equal(t, tc.stdout, out.String(), tc.arg)
		require.Equal(t, tc.stderr, errOut.String(), tc.arg)
		require.Equal(t, tc.callsFn, called, tc.arg)
	}
}
