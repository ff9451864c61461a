package hostcpu

import (
	"os"
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
