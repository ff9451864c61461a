// Package gpu reads GPU telemetry from nvidia-smi, for executor-gpu's job:gpu_metrics
// events and its /healthz. It only reads; it never changes a device's settings.
package gpu

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// fields are the nvidia-smi --query-gpu fields read, in order.
var fields = []string{"index", "name", "uuid", "utilization.gpu", "utilization.memory", "memory.used",
	"memory.total", "temperature.gpu", "power.draw"}

// Metric is one GPU's sample. Numbers nvidia-smi reports as unavailable ("[N/A]") are nil.
type Metric struct {
	Index         int      `json:"index"`
	Name          string   `json:"name"`
	UUID          string   `json:"uuid"`
	UtilGPU       *float64 `json:"utilization_gpu_pct"`
	UtilMemory    *float64 `json:"utilization_memory_pct"`
	MemoryUsedMiB *float64 `json:"memory_used_mib"`
	MemoryTotMiB  *float64 `json:"memory_total_mib"`
	TemperatureC  *float64 `json:"temperature_c"`
	PowerW        *float64 `json:"power_w"`
}

// Probe runs nvidia-smi.
type Probe struct {
	// Command is the nvidia-smi executable; default "nvidia-smi" looked up on PATH.
	Command string
}

// ErrNoGPU says no GPU is visible: nvidia-smi is missing, fails, or lists no device.
var ErrNoGPU = errors.New("no GPU visible")

// Sample reads every visible GPU.
func (p Probe) Sample(ctx context.Context) ([]Metric, error) {
	cmd := p.Command
	if cmd == "" {
		cmd = "nvidia-smi"
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s not found on PATH", ErrNoGPU, cmd)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu="+strings.Join(fields, ","),
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: nvidia-smi failed: %v", ErrNoGPU, err)
	}
	ms, err := Parse(string(out))
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: nvidia-smi lists no device", ErrNoGPU)
	}
	return ms, nil
}

// Parse reads nvidia-smi's CSV (noheader, nounits) for the fields above.
func Parse(out string) ([]Metric, error) {
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = len(fields)
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parsing nvidia-smi output: %w", err)
	}
	ms := make([]Metric, 0, len(recs))
	for _, rec := range recs {
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("parsing nvidia-smi output: index %q", rec[0])
		}
		ms = append(ms, Metric{Index: idx, Name: strings.TrimSpace(rec[1]), UUID: strings.TrimSpace(rec[2]),
			UtilGPU: num(rec[3]), UtilMemory: num(rec[4]), MemoryUsedMiB: num(rec[5]), MemoryTotMiB: num(rec[6]),
			TemperatureC: num(rec[7]), PowerW: num(rec[8])})
	}
	return ms, nil
}

func num(s string) *float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil
	}
	return &f
}
