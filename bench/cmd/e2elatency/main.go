// Command e2elatency measures dispatch→completed latency of a job type on a running stack:
// it dispatches N jobs (with the given concurrency), waits for each to finish and reports
// the percentiles of the server-side time from the run's creation to its end, and of the
// time the client observed from POST to seeing the terminal status.
//
//	go run ./bench/cmd/e2elatency -n 100 -key "$(cat .run/admin.key)"
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/bench/internal/stats"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "dispatcher base URL")
	key := flag.String("key", os.Getenv("SWITCHYARD_API_KEY"), "API key (default $SWITCHYARD_API_KEY)")
	jobType := flag.String("job-type", "demo_llm", "job type to dispatch")
	n := flag.Int("n", 100, "number of jobs")
	conc := flag.Int("concurrency", 1, "jobs in flight at once")
	poll := flag.Duration("poll", 2*time.Millisecond, "status polling interval")
	warmup := flag.Int("warmup", 5, "jobs run first and not counted")
	flag.Parse()
	if *key == "" {
		fmt.Fprintln(os.Stderr, "e2elatency: -key or SWITCHYARD_API_KEY is required (make run writes it to .run/admin.key)")
		os.Exit(2)
	}
	c := &client{base: strings.TrimRight(*url, "/"), key: *key, http: &http.Client{Timeout: 30 * time.Second}}
	for i := 0; i < *warmup; i++ {
		if _, _, err := c.runOne(*jobType, *poll); err != nil {
			fmt.Fprintln(os.Stderr, "e2elatency: warmup:", err)
			os.Exit(1)
		}
	}
	var mu sync.Mutex
	var server, observed []time.Duration
	failures := 0
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Go(func() {
			for range jobs {
				s, o, err := c.runOne(*jobType, *poll)
				mu.Lock()
				if err != nil {
					failures++
					fmt.Fprintln(os.Stderr, "e2elatency:", err)
				} else {
					server = append(server, s)
					observed = append(observed, o)
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := 0; i < *n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("jobs=%d concurrency=%d failures=%d elapsed=%s rate=%.1f/s\n", *n, *conc, failures,
		elapsed.Round(time.Millisecond), float64(*n)/elapsed.Seconds())
	fmt.Printf("server  dispatch->completed: %s\n", stats.Summarize(server))
	fmt.Printf("client  POST->seen completed: %s\n", stats.Summarize(observed))
	if failures > 0 {
		os.Exit(1)
	}
}

type client struct {
	base, key string
	http      *http.Client
}

func (c *client) do(method, path string, body any, out any) (int, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

type runView struct {
	Status  string `json:"status"`
	Timings struct {
		CreatedAt  time.Time  `json:"createdAt"`
		FinishedAt *time.Time `json:"finishedAt"`
	} `json:"timings"`
}

// runOne dispatches a job and polls until it ends; it returns the server-side and the
// client-observed latency.
func (c *client) runOne(jobType string, poll time.Duration) (time.Duration, time.Duration, error) {
	start := time.Now()
	var res struct {
		JobID string `json:"jobId"`
		Code  string `json:"code"`
	}
	code, err := c.do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": jobType, "payload": map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello"}}},
	}, &res)
	if err != nil || code != http.StatusAccepted {
		return 0, 0, fmt.Errorf("dispatch: status %d code %s: %v", code, res.Code, err)
	}
	for {
		var r runView
		if _, err := c.do(http.MethodGet, "/api/v1/dispatch/"+res.JobID, nil, &r); err != nil {
			return 0, 0, err
		}
		switch r.Status {
		case "completed":
			return r.Timings.FinishedAt.Sub(r.Timings.CreatedAt), time.Since(start), nil
		case "failed", "timed_out", "cancelled", "rejected":
			return 0, 0, fmt.Errorf("job %s ended %s", res.JobID, r.Status)
		}
		if time.Since(start) > 60*time.Second {
			return 0, 0, fmt.Errorf("job %s still %s after 60s", res.JobID, r.Status)
		}
		time.Sleep(poll)
	}
}
