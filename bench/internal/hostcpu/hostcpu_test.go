package hostcpu

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestSinceCountsBusyTime(t *testing.T) {
	a, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	// Spin for 300 ms: the machine was busy for at least that much CPU time.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	u := b.Since(a)
	if u.BusySeconds < 0.1 { // lenient: a starved host steals some of it
		t.Fatalf("busy %.2fs after spinning 0.3s", u.BusySeconds)
	}
	if u.Busy <= 0 || u.Busy > 1 || u.Steal < 0 || u.Steal > 1 {
		t.Fatalf("shares out of range: %+v", u)
	}
}

// rusageCPU is this process's user+system CPU time as the kernel reports it through
// getrusage: an independent reading to compare Process with.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestProcessCountsOwnTime spins until getrusage says this process used 300 ms of CPU —
// however long a busy host takes to give it that — and wants Process to agree within its
// clock-tick resolution.
func TestProcessCountsOwnTime(t *testing.T) {
	a, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ra := rusageCPU(t)
	for deadline := time.Now().Add(time.Minute); rusageCPU(t)-ra < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("got less than 300 ms of CPU in a minute")
		}
	}
	b, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := rusageCPU(t) - ra
	if d := b - a; d < want-50*time.Millisecond || d > want+50*time.Millisecond { // /proc counts in 10 ms ticks
		t.Fatalf("Process says %s, getrusage %s", d, want)
	}
	if _, err := Process(-1); err == nil {
		t.Fatal("no error for a process that cannot exist")
	}
}

func TestProcessesCountsChildren(t *testing.T) {
	child := exec.Command("sh", "-c", "while :; do :; done")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	own, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the spinning child used no CPU within 10s")
		}
		kid, err := Process(child.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if kid >= 50*time.Millisecond {
			break // the child has used CPU of its own
		}
		time.Sleep(10 * time.Millisecond)
	}
	both, err := Processes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if both < own+50*time.Millisecond {
		t.Fatalf("process and children %s; the process alone had %s and its child at least 50ms", both, own)
	}
}

// TestRSSGrowsWithTouchedMemory: touching 64 MiB more raises the process's RSS by about that.
func TestRSSGrowsWithTouchedMemory(t *testing.T) {
	before, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if grew := after - before; grew < 48<<20 {
		t.Fatalf("RSS grew by %d bytes after touching 64 MiB", grew)
	}
	_ = buf[len(buf)-1]
}
