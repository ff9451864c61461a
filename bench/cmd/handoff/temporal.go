package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/hostcpu"
	"github.com/switchyard-ai/switchyard/harness"
)

// temporal is Temporal's dev server (`temporal server start-dev`: in-memory SQLite, every
// service in one process, headless) and the temporalhandoff bench that runs a worker
// against it.
type temporal struct {
	name   string
	server *exec.Cmd
	exited chan struct{} // closed once the server has exited
	bench  string
	addr   string
	log    *os.File
}

// tunedFlags are the dev server's dynamic-config values of the temporal-tuned system:
// Temporal's documented latency knobs. The history service reads its transfer queue (the
// tasks that hand a workflow or activity task to matching) at most
// history.transferProcessorMaxPollRPS (20) times a second per shard, which alone costs a
// hand-off of two such tasks up to 2 × 50 ms when idle; eager activity execution hands the
// next activity back to the worker in the workflow task's answer, skipping matching.
var tunedFlags = []string{
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=10000",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
}

func startTemporal(ctx context.Context, name, serverBin, benchBin string, extra []string) (_ *temporal, err error) {
	if serverBin == "" || benchBin == "" {
		return nil, errors.New("temporal: -temporal-server and -temporal-bench are required (bench/cmd/handoff/run.sh builds both)")
	}
	var ports [3]int
	for i := range ports {
		a, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(a)
		if ports[i], err = strconv.Atoi(p); err != nil {
			return nil, err
		}
	}
	t := &temporal{name: name, bench: benchBin, addr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	if t.log, err = os.CreateTemp("", "temporal-dev-*.log"); err != nil {
		return nil, err
	}
	args := append([]string{"server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]), "--metrics-port", strconv.Itoa(ports[2]),
		"--log-level", "warn"}, extra...)
	t.server = exec.Command(serverBin, args...)
	t.server.Stdout, t.server.Stderr = t.log, t.log
	t.server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := t.server.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", serverBin, err)
	}
	t.exited = make(chan struct{})
	go func() { _ = t.server.Wait(); close(t.exited) }()
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	// Ready once the HTTP API knows the default namespace.
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default", ports[1])
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("temporal dev server not ready after 90 s (log %s)", t.log.Name())
		}
		select {
		case <-t.exited:
			return nil, fmt.Errorf("temporal dev server exited (log %s)", t.log.Name())
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "%s: dev server pid %d on %s (%v)\n", name, t.server.Process.Pid, t.addr, args)
	return t, nil
}

func (t *temporal) Name() string { return t.name }

// chainLine is the part of temporalhandoff's JSON lines this command reads.
type chainLine struct {
	HandoffsUS []int64 `json:"handoffs_us"`
}

func (t *temporal) Phase(ctx context.Context, inflight, n, warmup int, label string) (sample, error) {
	serverBefore, err := hostcpu.Process(t.server.Process.Pid)
	if err != nil {
		return sample{}, err
	}
	cmd := exec.CommandContext(ctx, t.bench, "-addr", t.addr, "-workflows", strconv.Itoa(n),
		"-inflight", strconv.Itoa(inflight), "-warmup", strconv.Itoa(warmup), "-label", label)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("temporalhandoff: %w\n%s", err, stderr.String())
	}
	serverAfter, err := hostcpu.Process(t.server.Process.Pid)
	if err != nil {
		return sample{}, err
	}
	cpu := serverAfter - serverBefore + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var out []time.Duration
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var l chainLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return sample{}, fmt.Errorf("temporalhandoff printed %q: %w", sc.Text(), err)
		}
		for _, us := range l.HandoffsUS {
			out = append(out, time.Duration(us)*time.Microsecond)
		}
	}
	if len(out) != 2*n {
		return sample{}, fmt.Errorf("temporalhandoff reported %d hand-offs for %d workflows", len(out), n)
	}
	return sample{handoffs: out, cpu: cpu}, nil
}

// Close stops the dev server (SIGTERM to its process group, SIGKILL after 10 s).
func (t *temporal) Close() {
	if t.exited != nil {
		_ = syscall.Kill(-t.server.Process.Pid, syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-t.server.Process.Pid, syscall.SIGKILL)
			<-t.exited
		}
	}
	if t.log != nil {
		t.log.Close()
	}
}
