package dispatch

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-ai/switchyard/shared/payload"
)

// The bodies of the dispatch benchmarks: dispatchbench's (small) and a 4 KiB conversation.
var benchBodies = map[string][]byte{
	"small": []byte(`{"job_type":"bench_noop","user_id":"bench","payload":{"prompt":"hello"}}`),
	"4KiB": []byte(`{"job_type":"demo_llm","user_id":"u-1","priority":"high","metadata":{"source_service":"crm"},
		"payload":{"messages":[` + strings.Repeat(`{"role":"user","content":"`+strings.Repeat("lorem ipsum ", 28)+`"},`, 11) +
		`{"role":"user","content":"end"}]}}`),
}

// cpuPerOp reports the process's CPU time per operation beside the wall time: on a machine
// shared with other work, wall time mostly measures the wait for a core.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecode is Decode as the API runs it on every body.
func BenchmarkDecode(b *testing.B) {
	v := NewValidator()
	for name, body := range benchBodies {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var r Request
				if err := Decode(bytes.NewReader(body), v, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeBaseline is the Decode before the body checks: encoding/json, strict, then
// the validator. BenchmarkDecode's extra time is the cost of checkBody.
func BenchmarkDecodeBaseline(b *testing.B) {
	v := NewValidator()
	for name, body := range benchBodies {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				var r Request
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&r); err != nil {
					b.Fatal(err)
				}
				if f := v.Struct(&r); len(f) > 0 {
					b.Fatal(f)
				}
			}
		})
	}
}

// BenchmarkCheckBody is the duplicate-name, Unicode and NUL check alone.
func BenchmarkCheckBody(b *testing.B) {
	for name, body := range benchBodies {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if f := checkBody(body); f != nil {
					b.Fatal(f)
				}
			}
		})
	}
}

// BenchmarkCheckPayload is the payload shape check Dispatch makes.
func BenchmarkCheckPayload(b *testing.B) {
	for name, body := range benchBodies {
		var r Request
		if err := json.Unmarshal(body, &r); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if p := payload.Check("llm_only", r.Payload); p != nil {
					b.Fatal(p)
				}
			}
		})
	}
}
