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
