package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is one running process.
type Proc struct {
	// Name is the service (the binary's name); Addr is where it listens.
	Name, Addr string
	// Log is the file its output is appended to.
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Launch starts the binary path with exactly env and args, its output appended to logPath,
// in a process group of its own (a terminal's Ctrl-C reaches the caller, which stops the
// processes in order, not all at once).
func Launch(name, path, addr string, env, args []string, logPath string) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, Addr: addr, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited says whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() error { return p.Signal(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits until the process has drained and exited; after grace it
// is killed.
func (p *Proc) Stop(grace time.Duration) error { return p.Signal(syscall.SIGTERM, grace) }

// Signal sends sig and waits until the process has exited, killing it after grace unless
// sig is SIGKILL.
func (p *Proc) Signal(sig syscall.Signal, grace time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	if sig != syscall.SIGKILL {
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
	return nil
}

// WaitReady polls url until it answers 200, the process p (when not nil) exits, ctx ends
// or timeout passes. client nil is a plain HTTP client; tlsConfig-carrying clients check
// HTTPS services.
func WaitReady(ctx context.Context, client *http.Client, url string, p *Proc, timeout time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var exited <-chan struct{}
	if p != nil {
		exited = p.done
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up; see %s", p.Name, p.Log)
		case <-ctx.Done():
			where := ""
			if p != nil {
				where = "; see " + p.Log
			}
			return fmt.Errorf("%s did not answer 200 within %s%s", url, timeout, where)
		case <-tick.C:
		}
	}
}

// tlsClient is a client trusting only the roots of cfg.
func tlsClient(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}
