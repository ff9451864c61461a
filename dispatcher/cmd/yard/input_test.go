package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadInputReachesTheUserIntact: what the dispatcher says about bad input — each field
// with its path and its rule's limit — is what a yard user reads, once (a 400 is not
// retried), and a skill file's misfits are named by line and field.
func TestBadInputReachesTheUserIntact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.yard("", "dispatch", "demo_llm", "--payload", `{"messages":[{"role":"user","content":"a\u0000b"}]}`)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "VALIDATION_FAILED (400)")
	require.Contains(t, r.stderr, `payload.messages[0].content: must not contain the NUL character (\u0000), which cannot be stored (nul)`)

	r = b.yard("", "dispatch", "demo_llm", "--payload", `{"messages":"hello"}`)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "payload.messages: must be a list of messages ({role, content}) (type)")

	r = b.yard("", "dispatch", "demo_llm", "--payload", `{"prompt":"a","prompt":"b"}`)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "payload.prompt: appears more than once in its object; send each member once (duplicate_key)")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"),
		[]byte("job_type: x\nexecution_type: llm_only\nmax_tokens: lots\ntemperature: [1]\n"), 0o600))
	r = b.yard("", "skills", "apply", "--dir", dir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "parsing skill: 2 problems:\n  line 3: max_tokens must be a whole number, not the string \"lots\"\n"+
		"  line 4: temperature must be a number, not a list")
	require.NotContains(t, r.stderr, "unmarshal")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"),
		[]byte("job_type: x\nexecution_type: llm_only\ntemperature: 2.5\n"), 0o600))
	r = b.yard("", "skills", "apply", "--dir", dir, "--yes")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "temperature: must be at most 2 (max)")
}
