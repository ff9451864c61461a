package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	dispatcher "github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

var catalogue = filepath.Join("..", "..", "..", "skills")

// bundle is a dispatcher running in-process with an admin key, and yard pointed at it.
type bundle struct {
	t     *testing.T
	url   string
	key   string
	api   *client.Client
	pool  *pgxpool.Pool
	orgID string
}

func setup(t *testing.T, adjust ...func(*dispatcher.Options)) *bundle {
	t.Helper()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	redisURL, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(redisURL)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	orgID, err := bootstrap.EnsureOrg(ctx, pool, "acme", "Acme", "eu")
	require.NoError(t, err)
	_, err = bootstrap.LoadSkills(ctx, pool, orgID, catalogue, "test")
	require.NoError(t, err)
	key, _, err := auth.Create(ctx, pool, orgID, "yard-test", []auth.Role{auth.RoleAdmin}, "test")
	require.NoError(t, err)

	o := dispatcher.Options{DB: pool, Redis: rdb, Asynq: opt, Log: log, ReconcileEvery: time.Hour}
	for _, f := range adjust {
		f(&o)
	}
	a := dispatcher.New(o)
	a.Start(ctx)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Stop()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !a.Registry.Live() {
		require.True(t, time.Now().Before(deadline), "registry cache did not start")
		time.Sleep(5 * time.Millisecond)
	}
	api, err := client.New(srv.URL, key)
	require.NoError(t, err)
	return &bundle{t: t, url: srv.URL, key: key, api: api, pool: pool, orgID: orgID}
}

// result is one yard invocation's exit code and output.
type result struct {
	code           int
	stdout, stderr string
}

// yard runs the CLI in-process with stdin, against the bundle's dispatcher. The
// environment is empty, so nothing of the developer's shell leaks in.
func (b *bundle) yard(stdin string, args ...string) result {
	b.t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"--url", b.url, "--key", b.key}, args...)
	code := run(ctx, args, strings.NewReader(stdin), &out, &errOut, func(string) string { return "" })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (b *bundle) dispatchJSON(args ...string) client.DispatchResult {
	b.t.Helper()
	r := b.yard("", append([]string{"dispatch", "-o", "json"}, args...)...)
	require.Equal(b.t, exitOK, r.code, r.stderr)
	var res client.DispatchResult
	require.NoError(b.t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	return res
}

func TestDispatchStatusSpansCancelWatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.dispatchJSON("demo_llm", "--prompt", "hi", "--priority", "high", "--user", "u1")
	require.Equal(t, client.StatusQueued, res.Status)

	r := b.yard("", "dispatch", "demo_llm", "--payload", `{"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "status")
	require.Contains(t, r.stdout, "queued")

	r = b.yard("", "status", res.JobID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, res.JobID)
	require.Contains(t, r.stdout, "demo_llm")
	require.Contains(t, r.stdout, "priority high")

	r = b.yard("", "spans", res.JobID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "└─ dispatch dispatch demo_llm [ok]")

	r = b.yard("", "list", "--job-type", "demo_llm")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, res.JobID)

	r = b.yard("", "cancel", res.JobID)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, res.JobID+" cancelled\n", r.stdout)

	// watch replays the journal to the terminal event; a cancelled job is exit 1.
	r = b.yard("", "watch", res.JobID)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stdout, "job:queued")
	require.Contains(t, r.stdout, "job:cancelled")
	require.Contains(t, r.stderr, "ended: job:cancelled")

	r = b.yard("", "watch", res.JobID, "-o", "json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last client.Event
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "job:cancelled", last.Type)
}

func TestPayloadFromStdinAndBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.yard(`{"prompt":"from stdin"}`, "dispatch", "demo_llm", "--payload-file", "-", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = b.yard("", "dispatch", "demo_llm")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--payload")
	r = b.yard("", "dispatch", "demo_llm", "--payload", "{nope")
	require.Equal(t, exitUsage, r.code)
	r = b.yard("", "status")
	require.Equal(t, exitUsage, r.code)

	// API errors print the code, the failing fields and the hints.
	r = b.yard("", "dispatch", "demo_llm", "--prompt", "x", "--priority", "urgent")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "VALIDATION_FAILED (400)")
	require.Contains(t, r.stderr, "priority: must be one of")
	r = b.yard("", "status", uuid.NewString())
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "JOB_NOT_FOUND (404)")
	require.Contains(t, r.stderr, "hint:")
	r = b.yard("", "status", uuid.NewString(), "-o", "json")
	require.Equal(t, exitError, r.code)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &body), r.stderr)
	require.Equal(t, "JOB_NOT_FOUND", body["code"])
}

func TestBatchFromJSONL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"job_type":"demo_llm","payload":{"prompt":"one"}}

{"job_type":"no_such_skill","payload":{"prompt":"two"}}
{"job_type":"demo_llm","payload":{"prompt":"three"},"priority":"low"}
`), 0o600))
	r := b.yard("", "batch", file)
	require.Equal(t, exitError, r.code, "a refused item makes the exit status 1")
	require.Contains(t, r.stdout, "2 accepted, 1 refused")
	require.Contains(t, r.stdout, "SKILL_NOT_FOUND")

	r = b.yard(`[{"job_type":"demo_llm","payload":{"prompt":"a"}}]`, "batch", "-", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var res client.BatchResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.Len(t, res.Items, 1)
	require.NotNil(t, res.Items[0].Result)
	require.Equal(t, client.StatusQueued, res.Items[0].Result.Status)

	r = b.yard("", "batch", "/does/not/exist")
	require.Equal(t, exitError, r.code)
}

// catalogueCopy copies the repository's skills/ into a temp dir and returns it.
func catalogueCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(catalogue)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(catalogue, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
	}
	return dir
}

func TestSkillsApplyShowsTheDiffFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dir := catalogueCopy(t)

	r := b.yard("", "skills", "apply", "--dir", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Registry is up to date")

	demo, err := os.ReadFile(filepath.Join(dir, "demo_llm.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(demo), "max_tokens: 256")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo_llm.yaml"),
		bytes.Replace(demo, []byte("max_tokens: 256"), []byte("max_tokens: 512"), 1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zz_translate.yaml"), []byte(`job_type: zz_translate
description: Translates text.
execution_type: llm_only
risk_level: limited
`), 0o600))

	r = b.yard("", "skills", "apply", "--dir", dir, "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "~ demo_llm\n    max_tokens: 256 → 512\n")
	require.Contains(t, r.stdout, "+ zz_translate (new)")
	require.Contains(t, r.stdout, "risk_level: limited")
	require.Contains(t, r.stdout, "2 to apply")
	unchanged := func() {
		s, err := b.api.Skills.Get(ctx, "demo_llm")
		require.NoError(t, err)
		require.Equal(t, 256, s.MaxTokens)
		_, err = b.api.Skills.Get(ctx, "zz_translate")
		require.ErrorIs(t, err, client.ErrSkillNotFound)
	}
	unchanged()

	// Without --yes it asks; anything but yes applies nothing.
	r = b.yard("n\n", "skills", "apply", "--dir", dir)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stdout, "max_tokens: 256 → 512", "the diff is shown before the question")
	require.Contains(t, r.stderr, "Apply 2 change(s)")
	require.Contains(t, r.stderr, "aborted")
	unchanged()
	r = b.yard("", "skills", "apply", "--dir", dir)
	require.Equal(t, exitError, r.code, "no answer (EOF) is no")
	unchanged()

	r = b.yard("y\n", "skills", "apply", "--dir", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "updated demo_llm (version 2)")
	require.Contains(t, r.stdout, "created zz_translate (version 1)")
	s, err := b.api.Skills.Get(ctx, "demo_llm")
	require.NoError(t, err)
	require.Equal(t, 512, s.MaxTokens)

	r = b.yard("", "skills", "apply", "--dir", dir, "--yes", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out struct {
		Changes []any `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Empty(t, out.Changes)

	r = b.yard("", "skills", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "zz_translate")
	r = b.yard("", "skills", "show", "demo_llm")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "max_tokens")
	require.Contains(t, r.stdout, "512")
	r = b.yard("", "skills", "show", "demo_llm", "--history")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "update")
	require.Contains(t, r.stdout, "key:yard-test")

	r = b.yard("", "skills", "disable", "zz_translate")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = b.yard("", "dispatch", "zz_translate", "--prompt", "x")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "SKILL_NOT_FOUND")

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "x.yaml"), []byte("job_type: x\nexecution_typo: llm_only\n"), 0o600))
	r = b.yard("", "skills", "apply", "--dir", bad)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "execution_typo")
}

func TestReviewApproveReject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, err := b.api.Skills.Put(context.Background(), client.SkillSpec{JobType: "needs_review", Enabled: true,
		ExecutionType: "llm_only", RequiresApproval: true})
	require.NoError(t, err)
	one := b.dispatchJSON("needs_review", "--prompt", "x")
	two := b.dispatchJSON("needs_review", "--prompt", "y")
	require.Equal(t, client.StatusHeldForReview, one.Status)

	r := b.yard("", "reviews")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, one.JobID)
	require.Contains(t, r.stdout, two.JobID)

	r = b.yard("", "approve", one.JobID, "--reason", "fine")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, one.JobID+" queued\n", r.stdout)

	r = b.yard("", "reject", two.JobID)
	require.Equal(t, exitUsage, r.code, "--reason is required")
	r = b.yard("", "reject", two.JobID, "--reason", "no")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, two.JobID+" rejected\n", r.stdout)
}

func TestKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.yard("", "keys", "create", "crm", "--role", "dispatch,viewer", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var k client.CreatedKey
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &k), r.stdout)
	require.True(t, strings.HasPrefix(k.Secret, "sy_"))

	r = b.yard("", "keys", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, k.ID)
	require.Contains(t, r.stdout, "dispatch,viewer")
	require.NotContains(t, r.stdout, k.Secret)

	r = b.yard("", "keys", "revoke", k.ID)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = b.yard("", "keys", "list")
	require.Contains(t, r.stdout, "revoked")
	r = b.yard("", "keys", "create", "nope")
	require.Equal(t, exitUsage, r.code, "--role is required")
}

func TestKeyResolution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	file := filepath.Join(t.TempDir(), "admin.key")
	require.NoError(t, os.WriteFile(file, []byte(b.key+"\n"), 0o600))
	run1 := func(env map[string]string, args ...string) result {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
		return result{code, out.String(), errOut.String()}
	}
	// --key-file, and the URL from the environment.
	r := run1(map[string]string{"SWITCHYARD_URL": b.url}, "--key-file", file, "skills", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	// The key from the environment.
	r = run1(map[string]string{"SWITCHYARD_URL": b.url, "SWITCHYARD_API_KEY": b.key}, "skills", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	// A flag beats the environment.
	r = run1(map[string]string{"SWITCHYARD_URL": b.url, "SWITCHYARD_API_KEY": b.key}, "--key", "sy_bad", "skills", "list")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "UNAUTHENTICATED")
	r = run1(nil, "--url", b.url, "--key", b.key, "-o", "yaml", "skills", "list")
	require.Equal(t, exitUsage, r.code)
}

// TestJSONListsAreNeverNull: every list command prints an empty list as [] under -o json,
// never null, so a script can iterate over the answer without a special case.
func TestJSONListsAreNeverNull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := catalogueCopy(t)
	for _, tc := range []struct {
		args []string
		// lists are the top-level keys holding lists; none means the answer is a list.
		lists []string
	}{
		{args: []string{"list"}, lists: []string{"items"}},
		{args: []string{"list", "--all"}, lists: []string{"items"}},
		{args: []string{"list", "--status", "failed", "--limit", "5"}, lists: []string{"items"}},
		{args: []string{"chain", "list"}, lists: []string{"items"}},
		{args: []string{"chain", "list", "--all"}, lists: []string{"items"}},
		{args: []string{"reviews"}},
		{args: []string{"skills", "list", "-q", "no_such_skill"}},
		{args: []string{"skills", "apply", "--dir", dir, "--dry-run"}, lists: []string{"changes", "unchanged", "unmanaged", "applied"}},
		{args: []string{"keys", "list"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := b.yard("", append(tc.args, "-o", "json")...)
			require.Equal(t, exitOK, r.code, r.stderr)
			if len(tc.lists) == 0 {
				var list []any
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
				require.NotNil(t, list, "an empty list prints [], not null")
				return
			}
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &obj), r.stdout)
			for _, k := range tc.lists {
				var list []any
				require.NoError(t, json.Unmarshal(obj[k], &list), "%s: %s", k, obj[k])
				require.NotNil(t, list, "%s: an empty list prints [], not null: %s", k, r.stdout)
			}
		})
	}
}

// TestHelp: --help, -h and help print the usage on stdout and exit 0, without a key or a
// dispatcher.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"list", "--help"}, {"help", "skills", "apply"}, {"chain", "run", "--help"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
		require.Equal(t, exitOK, code, "%v: %s", args, errOut.String())
		require.Contains(t, out.String(), "Usage:", "%v", args)
	}
}

// TestSpansShowAttempts: each executor span names the attempt that made it, so a resumed
// run's spans are told apart, abandoned ones included.
func TestSpansShowAttempts(t *testing.T) {
	t.Parallel()
	d := 1.5
	tree := &client.SpanNode{Span: client.Span{Type: "react_iteration", Name: "iteration 2", Status: "ok", Attempt: 1},
		Children: []*client.SpanNode{
			{Span: client.Span{Type: "llm_call", Name: "llm iter/2/llm", Status: "abandoned", Attempt: 1}},
			{Span: client.Span{Type: "llm_call", Name: "llm iter/2/llm", Status: "ok", Attempt: 2, DurationMS: &d}},
		}}
	var out strings.Builder
	printSpan(&out, &client.SpanNode{Span: client.Span{Type: "dispatch", Name: "dispatch x", Status: "ok"},
		Children: []*client.SpanNode{tree}}, "", true)
	require.Equal(t, `└─ dispatch dispatch x [ok]
   └─ react_iteration iteration 2 [ok] attempt 1
      ├─ llm_call llm iter/2/llm [abandoned] attempt 1
      └─ llm_call llm iter/2/llm [ok] attempt 2 1.5ms
`, out.String())
}
