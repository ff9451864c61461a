package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// Test is New for a test: its own fresh database and Redis database from shared/testkit
// (unless opts names stores), Dir a temporary directory of the test; it fails the test on
// error, closes the harness when the test ends and, if the test failed, logs the end of
// every service's log.
func Test(t testing.TB, opts Options) *Harness {
	t.Helper()
	if opts.DatabaseURL == "" {
		opts.DatabaseURL, _ = testkit.DB(t)
	}
	if opts.RedisURL == "" {
		opts.RedisURL, _ = testkit.Redis(t)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	h, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the harness: %v", err)
	}
	t.Cleanup(func() {
		h.Close()
		if t.Failed() {
			h.logTails(t)
		}
	})
	return h
}

// logTails logs the last 6,000 bytes of each service's log.
func (h *Harness) logTails(t testing.TB) {
	h.mu.Lock()
	seen := map[string]bool{}
	var logs []string
	for _, p := range h.procs {
		if !seen[p.Log] {
			seen[p.Log] = true
			logs = append(logs, p.Log)
		}
	}
	h.mu.Unlock()
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- %s ---\n%s", l, b)
	}
}

// TestkitStores gives a command (a benchmark, not a test) a fresh database and Redis
// database on the test servers of shared/testkit (SWITCHYARD_TEST_DATABASE_URL and
// SWITCHYARD_TEST_REDIS_URL, `eval "$(scripts/stack.sh env test)"`), and the function that
// drops them again.
func TestkitStores() (dbURL, redisURL string, drop func(), err error) {
	t := &commandTB{}
	defer func() {
		if r := recover(); r != nil {
			t.cleanup()
			err = fmt.Errorf("%v", r)
		}
	}()
	dbURL, _ = testkit.DB(t)
	redisURL, _ = testkit.Redis(t)
	return dbURL, redisURL, t.cleanup, nil
}

// commandTB lets a command use testkit, which asks for a testing.TB only to fail, log and
// clean up; the methods testkit does not call panic (the embedded nil TB).
type commandTB struct {
	testing.TB
	cleanups []func()
}

func (*commandTB) Helper() {}
func (*commandTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(strings.TrimSuffix(format, "\n"), args...))
}
func (*commandTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *commandTB) Cleanup(f func())              { t.cleanups = append(t.cleanups, f) }

func (t *commandTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}
