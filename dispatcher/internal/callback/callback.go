// Package callback delivers a finished run's result to its callback_url: a POST signed
// with HMAC-SHA256 over "<timestamp>.<body>" with the organisation's secret, retried with
// exponential backoff, and refused for private, loopback and metadata addresses unless the
// organisation allowlists them (shared/netguard, checked after DNS and on every redirect).
// Delivery state lives on the run row, so any dispatcher replica may deliver and a restart
// loses nothing; rows are claimed with SKIP LOCKED.
package callback

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/netguard"
	"github.com/switchyard-ai/switchyard/shared/periodic"
)

// Headers of a callback request.
const (
	HeaderTimestamp = "X-Switchyard-Timestamp"
	HeaderSignature = "X-Switchyard-Signature"
	HeaderJobID     = "X-Switchyard-Job-ID"
)

// MaxAttempts is how many times a callback is tried before it is given up.
const MaxAttempts = 8

// Sign returns the signature header value for a body sent at ts: "v1=<hex>".
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.", ts)
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature in constant time and that ts is within tolerance of now.
func Verify(secret string, ts int64, body []byte, signature string, tolerance time.Duration, now time.Time) bool {
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature))
}

// Sender delivers callbacks.
type Sender struct {
	DB  *pgxpool.Pool
	Log *slog.Logger
	// Every is the polling interval; default 500ms. Timeout bounds one POST; default 10s.
	Every, Timeout time.Duration
	// Resolver, when set, replaces DNS for the SSRF guard (tests).
	Resolver netguard.Resolver

	loop periodic.Loop
}

// Start delivers until Stop.
func (s *Sender) Start(ctx context.Context) {
	s.loop = periodic.Loop{Every: cmp.Or(s.Every, 500*time.Millisecond), Run: func(ctx context.Context) {
		if _, err := s.Once(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("delivering callbacks", "error", err)
		}
	}}
	s.loop.Start(ctx)
}

// Stop ends delivery.
func (s *Sender) Stop() { s.loop.Stop() }

type due = runstore.DueCallback

// runStore is what the sender uses of the run store (runstore.Store): the runs whose
// callback is due, and what their delivery did.
type runStore interface {
	ClaimCallbacks(ctx context.Context) ([]runstore.DueCallback, error)
	GetRun(ctx context.Context, orgID, id string) (runstore.Run, error)
	RetryCallback(ctx context.Context, runID string, attempts int, delay time.Duration) error
	EndCallback(ctx context.Context, runID string, attempts int, status string) error
}

var _ runStore = (*runstore.Store)(nil)

func (s *Sender) runs() runStore { return runstore.New(s.DB) }

// Once delivers the callbacks that are due and returns how many it tried.
func (s *Sender) Once(ctx context.Context) (int, error) {
	// Claim with a lease: a crashed sender's claims come due again after it.
	dues, err := s.runs().ClaimCallbacks(ctx)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, d := range dues {
		wg.Go(func() { s.deliver(ctx, d) })
	}
	wg.Wait()
	return len(dues), nil
}

func (s *Sender) deliver(ctx context.Context, d due) {
	log := s.Log.With("job_id", d.ID, "org_id", d.OrgID)
	r, err := s.runs().GetRun(ctx, d.OrgID, d.ID)
	if err != nil {
		log.Warn("reading run for callback", "error", err)
		return
	}
	r.Payload = nil
	body, err := json.Marshal(r)
	if err != nil {
		log.Error("encoding callback", "error", err)
		return
	}
	guard, err := netguard.New(netguard.Config{Allow: d.Allow, Resolver: s.Resolver, Timeout: s.timeout()})
	if err != nil {
		s.finish(ctx, log, d, 0, "refused", fmt.Sprintf("invalid callback allowlist: %v", err))
		return
	}
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		s.finish(ctx, log, d, 0, "refused", "invalid callback url")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchyard-callback/1")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(d.Secret, ts, body))
	req.Header.Set(HeaderJobID, d.ID)
	req.Header.Set("Idempotency-Key", d.ID)
	// The guard is the organisation's and its transport this delivery's: a connection left
	// idle in it would never be used again, and would hold a socket and two goroutines until
	// the idle timeout.
	client := guard.Client()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		var blocked *netguard.BlockedError
		if errors.As(err, &blocked) {
			s.finish(ctx, log, d, 0, "refused", blocked.Error())
			return
		}
		s.retry(ctx, log, d, 0, err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		s.finish(ctx, log, d, resp.StatusCode, "delivered", "")
		return
	}
	s.retry(ctx, log, d, resp.StatusCode, "status "+strconv.Itoa(resp.StatusCode))
}

func (s *Sender) timeout() time.Duration {
	if s.Timeout == 0 {
		return 10 * time.Second
	}
	return s.Timeout
}

func (s *Sender) retry(ctx context.Context, log *slog.Logger, d due, code int, msg string) {
	attempt := d.Attempts + 1
	if attempt >= MaxAttempts {
		s.finish(ctx, log, d, code, "failed", msg)
		return
	}
	delay := time.Second << min(attempt, 10)
	s.record(ctx, d, attempt, code, msg)
	if err := s.runs().RetryCallback(ctx, d.ID, attempt, delay); err != nil {
		log.Warn("scheduling callback retry", "error", err)
	}
	log.Warn("callback failed; will retry", "attempt", attempt, "status_code", code, "retry_in", delay.String())
}

func (s *Sender) finish(ctx context.Context, log *slog.Logger, d due, code int, status, msg string) {
	attempt := d.Attempts + 1
	s.record(ctx, d, attempt, code, msg)
	if err := s.runs().EndCallback(ctx, d.ID, attempt, status); err != nil {
		log.Warn("recording callback outcome", "error", err)
	}
	if status == "delivered" {
		log.Info("callback delivered", "attempt", attempt)
	} else {
		log.Warn("callback given up", "status", status, "reason", msg, "attempt", attempt)
	}
}

func (s *Sender) record(ctx context.Context, d due, attempt, code int, msg string) {
	var sc, em any
	if code != 0 {
		sc = code
	}
	if msg != "" {
		em = msg
	}
	_, _ = s.DB.Exec(ctx, `INSERT INTO callback_deliveries (run_id, url, attempt, status_code, error) VALUES ($1, $2, $3, $4, $5)`,
		d.ID, d.URL, attempt, sc, em)
}
