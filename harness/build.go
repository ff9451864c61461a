package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The services, by binary name.
const (
	Dispatcher  = "dispatcher"
	Executor    = "executor"
	ExecutorGPU = "executor-gpu"
	Router      = "provider-router"
	Sim         = "sim-llm"
	Tool        = "demo-tool"
)

// Platform is what `make run` starts, in its start order: each service after those it
// calls.
var Platform = []string{Sim, Tool, Router, Executor, Dispatcher}

// packages are the main packages of the binaries, relative to the repository root.
var packages = map[string]string{
	Dispatcher:  "dispatcher/cmd/dispatcher",
	Executor:    "executor/cmd/executor",
	ExecutorGPU: "executor/cmd/executor-gpu",
	Router:      "provider-router/cmd/provider-router",
	Sim:         "provider-router/cmd/sim-llm",
	Tool:        "tools/cmd/demo-tool",
}

// Build compiles the named binaries (every service when none is named) into dir with one
// `go build`, from the repository's workspace.
func Build(ctx context.Context, dir string, names ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = append([]string{ExecutorGPU}, Platform...)
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		pkg, ok := packages[n]
		if !ok {
			return fmt.Errorf("harness: no binary %q", n)
		}
		args = append(args, "./"+pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// RepoRoot is the repository's root: the first directory above the working directory
// that holds go.work (tests run in their package's directory, tools from the root).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run from the repository")
		}
		dir = parent
	}
}

// Ports come from 21000-24999: below Linux's ephemeral range (32768+), so a client socket
// cannot take a killed service's port while it is down (it comes back on the same address),
// and apart from the stack profiles' 25432-26381. Test binaries run side by side (go test
// -p 2: e2e beside the fault suite), so a port handed out is also reserved across processes:
// an flock on a file named after it, held until this process exits (the kernel drops the
// lock with the process, however it ends). Processes start at different offsets (by pid)
// and skip ports in use or reserved.
const (
	portLow, portHigh = 21000, 25000
)

var (
	portMu   sync.Mutex
	nextPort int
	reserved []*os.File // held open: closing one would release its port's lock
)

// FreeAddr returns a loopback address whose port is free now and that no other process
// using this package will be given.
func FreeAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	lockDir := filepath.Join(os.TempDir(), "switchyard-harness-ports")
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		return "", fmt.Errorf("port reservations: %w", err)
	}
	for range portHigh - portLow {
		switch nextPort++; {
		case nextPort < portLow: // first call: start at this process's offset
			nextPort = portLow + os.Getpid()%(portHigh-portLow)
		case nextPort >= portHigh: // wrap to the bottom, not to the offset again
			nextPort = portLow
		}
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(nextPort)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return "", fmt.Errorf("port reservations: %w", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close() // another process holds it
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nextPort))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			_ = f.Close() // in use by something that is not ours
			continue
		}
		_ = l.Close()
		reserved = append(reserved, f)
		return addr, nil
	}
	return "", fmt.Errorf("no free port in %d-%d", portLow, portHigh-1)
}

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}
