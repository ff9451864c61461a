// Package hostcpu reads the machine's CPU accounting (/proc/stat) so that a benchmark can
// report what its load cost the whole machine — every process of the stack, Postgres and
// Redis included — and how much of the time the hypervisor took away (steal), which makes
// a run's latencies incomparable with another's.
package hostcpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sample is the machine's cumulative CPU time at one moment, in clock ticks.
type Sample struct {
	at    time.Time
	busy  uint64 // user, nice, system, irq, softirq
	steal uint64
	total uint64 // busy, idle, iowait and steal
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// Read samples /proc/stat.
func Read() (Sample, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Sample{}, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Sample{}, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			return Sample{}, fmt.Errorf("parsing /proc/stat: %w", err)
		}
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	busy := user + nice + system + irq + softirq
	return Sample{at: time.Now(), busy: busy, steal: steal, total: busy + idle + iowait + steal}, nil
}

// Usage is what the machine's CPUs did between two samples.
type Usage struct {
	// BusySeconds is CPU time spent running anything (all cores together).
	BusySeconds float64
	// Busy and Steal are shares of all the cores' time.
	Busy, Steal float64
}

// Since is the usage between an earlier sample and this one.
func (s Sample) Since(earlier Sample) Usage {
	total := float64(s.total - earlier.total)
	if total == 0 {
		return Usage{}
	}
	return Usage{
		BusySeconds: float64(s.busy-earlier.busy) / clockTicks,
		Busy:        float64(s.busy-earlier.busy) / total,
		Steal:       float64(s.steal-earlier.steal) / total,
	}
}

// Process is the CPU time (user and system) one process has used so far, from
// /proc/<pid>/stat: what a benchmark reports per operation for the process it measures.
func Process(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: the fields after it start past its ')'.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat %q", pid, raw)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat %q", pid, raw)
	}
	// utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Processes is the CPU time used so far by the processes pids and their direct children
// (Postgres's backends are the children of its postmaster): what a benchmark on a shared
// host reports as its stack's cost, which other tenants' load does not inflate. A child
// that exited is not counted; one that did not exist at an earlier reading counts from its
// start.
func Processes(pids ...int) (time.Duration, error) {
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !want[pid] && !want[parent(pid)] {
			continue
		}
		d, err := Process(pid)
		if err != nil {
			continue // exited since the directory was read
		}
		total += d
	}
	return total, nil
}

// parent is a process's parent id, or 0 when it cannot be read.
func parent(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// RSS is a process's resident set size (VmRSS of /proc/<pid>/status), in bytes.
func RSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing /proc/%d/status: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
