package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Stores are a PostgreSQL and a Redis of their own, run by scripts/stack.sh's faults
// profile in a directory of their own (data fsynced as in production), which a fault test
// may crash and start again. The test stores of shared/testkit are shared and must never
// be crashed.
type Stores struct {
	// DBURL and RedisURL are the stores' URLs.
	DBURL, RedisURL string
	root            string
	env             []string // what stack.sh needs to find these stores
}

// StartStores stops whatever a previous run left in dir, empties it and starts Postgres
// and Redis there; pgPort and redisPort 0 keep the faults profile's 25434 and 26381.
func StartStores(ctx context.Context, dir string, pgPort, redisPort int) (*Stores, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	s := &Stores{root: root, env: []string{"SWITCHYARD_STACK_DIR=" + dir}}
	if pgPort != 0 {
		s.env = append(s.env, fmt.Sprintf("SWITCHYARD_PG_PORT=%d", pgPort))
	}
	if redisPort != 0 {
		s.env = append(s.env, fmt.Sprintf("SWITCHYARD_REDIS_PORT=%d", redisPort))
	}
	if _, err := s.stack(ctx, "stop", "faults"); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	// Postgres runs as the postgres user when we are root: it must reach its data in dir
	// (and through dir's parent, the caller's directory of the run).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, s.readURLs(ctx)
}

// Start starts Postgres and Redis, or whichever of them is down, and waits until both
// answer.
func (s *Stores) Start(ctx context.Context) error {
	_, err := s.stack(ctx, "start", "faults")
	return err
}

// Crash crashes "postgres" (pg_ctl stop -m immediate) or "redis" (kill -9).
func (s *Stores) Crash(ctx context.Context, store string) error {
	_, err := s.stack(ctx, "crash", "faults", store)
	return err
}

// Stop stops both stores.
func (s *Stores) Stop(ctx context.Context) error {
	_, err := s.stack(ctx, "stop", "faults")
	return err
}

func (s *Stores) readURLs(ctx context.Context) error {
	out, err := s.stack(ctx, "env", "faults")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, "'")
		switch k {
		case "SWITCHYARD_DATABASE_URL":
			s.DBURL = v
		case "SWITCHYARD_REDIS_URL":
			s.RedisURL = v
		}
	}
	if s.DBURL == "" || s.RedisURL == "" {
		return fmt.Errorf("scripts/stack.sh env faults printed no store URLs: %s", out)
	}
	return nil
}

// stack runs scripts/stack.sh with these stores' directory and ports.
func (s *Stores) stack(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "scripts", "stack.sh"), args...)
	cmd.Env = append(os.Environ(), s.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/stack.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
