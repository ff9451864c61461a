package hostcpu

import (
	"os"
	"os/exec"
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

func TestProcessCountsOwnTime(t *testing.T) {
	a, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := b - a; d < 100*time.Millisecond || d > 5*time.Second { // lenient, as above
		t.Fatalf("process used %s while spinning 0.3s", d)
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
