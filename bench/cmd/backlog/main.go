// Command backlog plays seed 002's backlog on a running platform: N jobs dispatched at
// once against a provider whose rate limit is far below what they need, with the router
// configured to the provider's limit. It reports whether every job completed, how close the
// provider calls came to the limit (the bucket never idled while work waited: ≥ 99 %), the
// upstream 429s (counted by sim-llm), how the runs waited (parks, executor workers busy)
// and the makespan.
//
// The simulator must enforce the limit itself, so that an over-admission would show as a
// 429: start the platform with it.
//
//	SIM_LLM_MODELS='sim-fast=latency=uniform:200ms-800ms,output=uniform:20-60,rpm=200' make start
//	go run ./bench/cmd/backlog -key "$(cat .run/admin.key)" -jobs 1000 -rpm 200
//
// The router's limit for the dev organisation's sim-fast is set to -rpm for the run and
// removed afterwards; the skill is demo_llm unless -job-type says otherwise.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "dispatcher base URL")
	key := flag.String("key", os.Getenv("SWITCHYARD_API_KEY"), "admin API key (make run writes .run/admin.key)")
	dbURL := flag.String("db", "postgres://postgres@127.0.0.1:25432/switchyard?sslmode=disable", "Postgres URL")
	simURL := flag.String("sim", "http://127.0.0.1:8099", "sim-llm base URL, for its counts of 429s")
	jobs := flag.Int("jobs", 1000, "jobs in the backlog")
	rpm := flag.Int("rpm", 200, "the provider's requests per minute (the router is set to it)")
	jobType := flag.String("job-type", "demo_llm", "skill to dispatch (one LLM call per job)")
	wait := flag.Duration("timeout", 30*time.Minute, "how long to wait for the backlog to drain")
	flag.Parse()
	if *key == "" {
		fail(errors.New("-key is required"))
	}
	if err := run(*url, *key, *dbURL, *simURL, *jobType, *jobs, *rpm, *wait); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "backlog:", err)
	os.Exit(1)
}

func run(url, key, dbURL, simURL, jobType string, n, rpm int, wait time.Duration) error {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	var providerID string
	if err := db.QueryRow(ctx, `SELECT p.id FROM provider_configs p JOIN orgs o ON o.id = p.org_id
		WHERE o.slug = 'dev' AND p.name = 'sim-llm'`).Scan(&providerID); err != nil {
		return fmt.Errorf("finding the dev organisation's sim-llm provider: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm)
		VALUES ($1, 'sim-fast', $2, 0) ON CONFLICT (provider_config_id, model) DO UPDATE SET rpm = $2, tpm = 0`,
		providerID, rpm); err != nil {
		return fmt.Errorf("setting the router's limit: %w", err)
	}
	defer func() {
		_, _ = db.Exec(context.WithoutCancel(ctx), `DELETE FROM provider_limits WHERE provider_config_id = $1 AND model = 'sim-fast'`, providerID)
	}()
	// Both buckets start full. The router's does: a limit imposed on an unlimited bucket
	// starts full (docs/rate-limits.md). sim-llm's is refilled to match; otherwise a run
	// started right after another finds the provider's bucket drained while the router's is
	// full, and counts the 429s of that mismatch (16 in one such run), not the platform's.
	if err := simReset(simURL); err != nil {
		return err
	}
	simBefore, err := simCounts(simURL)
	if err != nil {
		return err
	}

	fmt.Printf("backlog: %d %s jobs against %d RPM (at the limit: %.0f s after the first minute's burst)\n",
		n, jobType, rpm, float64(max(n-rpm, 0))*60/float64(rpm))
	started := time.Now()
	ids, err := dispatchAll(ctx, url, key, jobType, n, started)
	if err != nil {
		return err
	}
	fmt.Printf("dispatched %d in %s\n", len(ids), time.Since(started).Round(time.Millisecond))

	// Drain: poll Postgres for the runs' statuses.
	deadline := time.Now().Add(wait)
	var statuses map[string]int
	for {
		statuses = map[string]int{}
		rows, err := db.Query(ctx, `SELECT status, count(*) FROM runs WHERE id = ANY($1::uuid[]) GROUP BY status`, ids)
		if err != nil {
			return err
		}
		live := 0
		for rows.Next() {
			var st string
			var c int
			if err := rows.Scan(&st, &c); err != nil {
				return err
			}
			statuses[st] = c
			if st == "queued" || st == "running" {
				live += c
			}
		}
		if rows.Err() != nil {
			return rows.Err()
		}
		if live == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // a progress poll of a minutes-long drain, not a wait for a signal
	}
	makespan := time.Since(started)

	// The provider calls, from the usage ledger: when each was made.
	var calls []time.Time
	rows, err := db.Query(ctx, `SELECT created_at - make_interval(secs => latency_ms / 1000.0) FROM usage_ledger
		WHERE run_id = ANY($1::uuid[]) ORDER BY 1`, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var t time.Time
		if err := rows.Scan(&t); err != nil {
			return err
		}
		calls = append(calls, t)
	}
	if rows.Err() != nil {
		return rows.Err()
	}
	var parks, parkedRuns, failedAttempts int
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT run_id) FROM run_events
		WHERE run_id = ANY($1::uuid[]) AND type = 'job:waiting'`, ids).Scan(&parks, &parkedRuns); err != nil {
		return err
	}
	if err := db.QueryRow(ctx, `SELECT COALESCE(sum(jsonb_array_length(attempt_errors)), 0) FROM runs
		WHERE id = ANY($1::uuid[])`, ids).Scan(&failedAttempts); err != nil {
		return err
	}
	codes := map[string]int{}
	rows, err = db.Query(ctx, `SELECT error->>'code', count(*) FROM runs WHERE id = ANY($1::uuid[]) AND error IS NOT NULL
		GROUP BY 1`, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c string
		var k int
		if err := rows.Scan(&c, &k); err != nil {
			return err
		}
		codes[c] = k
	}
	simAfter, err := simCounts(simURL)
	if err != nil {
		return err
	}

	fmt.Printf("statuses: %v; errors: %v; failed attempts: %d\n", statuses, codes, failedAttempts)
	fmt.Printf("parks: %d of %d runs parked, %d parks in all\n", parkedRuns, len(ids), parks)
	fmt.Printf("upstream: %d requests, %d answered, %d refused with 429\n",
		simAfter.Requests-simBefore.Requests, simAfter.Served-simBefore.Served, simAfter.RateLimited-simBefore.RateLimited)
	fmt.Printf("makespan: %s\n", makespan.Round(time.Second))
	if len(calls) > 1 {
		// A bucket of capacity rpm that refills rpm/60 per second allows rpm + span×rpm/60
		// calls in a span; how many were made is how well the limit was used.
		span := calls[len(calls)-1].Sub(calls[0])
		allowed := float64(rpm) + span.Seconds()*float64(rpm)/60
		fmt.Printf("provider calls: %d over %s; the limit allowed %.0f: %.1f %% of the limit used\n",
			len(calls), span.Round(time.Millisecond), allowed, 100*float64(len(calls))/allowed)
	}
	return nil
}

// dispatchAll sends n jobs with idempotency keys, 32 at a time, retrying a 429 or 503
// after its Retry-After (the key makes a retry safe).
func dispatchAll(ctx context.Context, url, key, jobType string, n int, t0 time.Time) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ids[i], errs[i] = dispatch(ctx, url, key, jobType, fmt.Sprintf("backlog-%d-%d", t0.UnixNano(), i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Clip(ids), nil
}

func dispatch(ctx context.Context, url, key, jobType, idem string) (string, error) {
	body, _ := json.Marshal(map[string]any{"job_type": jobType, "idempotency_key": idem,
		"payload": map[string]any{"prompt": "Summarise the backlog item " + idem}})
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/dispatch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
			var res struct {
				JobID string `json:"jobId"`
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				return "", err
			}
			return res.JobID, nil
		case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < 20:
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs, 1)) * time.Second)
		default:
			return "", fmt.Errorf("dispatch: %d %s", resp.StatusCode, raw)
		}
	}
}

type simTotals struct {
	Requests    int `json:"requests"`
	Served      int `json:"served"`
	RateLimited int `json:"refused_429"`
}

func simCounts(simURL string) (simTotals, error) {
	resp, err := http.Get(simURL + "/sim/stats")
	if err != nil {
		return simTotals{}, fmt.Errorf("reading sim-llm's counts: %w", err)
	}
	defer resp.Body.Close()
	var st struct {
		Total simTotals `json:"total"`
	}
	return st.Total, json.NewDecoder(resp.Body).Decode(&st)
}

// simReset refills sim-llm's buckets and zeroes its counts (POST /sim/reset).
func simReset(simURL string) error {
	resp, err := http.Post(simURL+"/sim/reset", "application/json", nil)
	if err != nil {
		return fmt.Errorf("resetting sim-llm: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("resetting sim-llm: %s", resp.Status)
	}
	return nil
}
