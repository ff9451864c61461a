package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// UsageShare is what the calls of one skill, provider, model or user consumed.
type UsageShare = apitypes.UsageShare

// UsagePoint is what the calls of one key consumed on one UTC day.
type UsagePoint = apitypes.UsagePoint

// AuditRecord is one LLM call of the audit export.
type AuditRecord = apitypes.AuditRecord

// UsageQuery selects the period of a usage report or an audit export: Month (YYYY-MM), or
// From and To (To exclusive); all empty means the current calendar month. Users bounds the
// users a report lists (0: the dispatcher's default, 20); Pseudonymise replaces user ids
// with the organisation's keyed pseudonyms.
type UsageQuery struct {
	Month        string
	From, To     time.Time
	Users        int
	Pseudonymise bool
}

func (q UsageQuery) values() url.Values {
	v := url.Values{}
	if q.Month != "" {
		v.Set("month", q.Month)
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.Users > 0 {
		v.Set("users", strconv.Itoa(q.Users))
	}
	if q.Pseudonymise {
		v.Set("pseudonymise", "true")
	}
	return v
}

// UsageReport returns the tokens and cost of q's period by day, skill, provider, model and
// user, and the current month against the organisation's limits.
func (o *OrgService) UsageReport(ctx context.Context, q UsageQuery) (Usage, error) {
	var u Usage
	err := o.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/usage", query: q.values(), retryable: true}, &u)
	return u, err
}

// UsageCSV writes the usage of q's period as CSV to w — one row per day, skill, provider,
// model and user — and returns the bytes written.
func (o *OrgService) UsageCSV(ctx context.Context, q UsageQuery, w io.Writer) (int64, error) {
	v := q.values()
	v.Set("format", "csv")
	body, err := o.c.download(ctx, "/api/v1/admin/usage", v, "text/csv")
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(w, body)
	if err != nil {
		return n, fmt.Errorf("reading the usage CSV: %w", err)
	}
	return n, nil
}

// AuditExport writes the audit export of q's period (JSON Lines, one AuditRecord per LLM
// call, in time order) to w as it arrives, and returns the bytes written. A stream the
// dispatcher cut short is an error (its last line may be the error's body).
func (o *OrgService) AuditExport(ctx context.Context, q UsageQuery, w io.Writer) (int64, error) {
	body, err := o.c.download(ctx, "/api/v1/admin/audit", q.values(), "application/x-ndjson")
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(w, body)
	if err != nil {
		return n, fmt.Errorf("reading the audit export: %w", err)
	}
	return n, nil
}

// AuditRecords yields the records of the audit export of q's period one at a time, never
// holding more than one line. It stops at the first error: the dispatcher's error line as
// an *APIError, or a stream cut short.
func (o *OrgService) AuditRecords(ctx context.Context, q UsageQuery) iter.Seq2[AuditRecord, error] {
	return func(yield func(AuditRecord, error) bool) {
		body, err := o.c.download(ctx, "/api/v1/admin/audit", q.values(), "application/x-ndjson")
		if err != nil {
			yield(AuditRecord{}, err)
			return
		}
		defer body.Close()
		r := bufio.NewReaderSize(body, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil && err != io.EOF {
				// A connection cut mid-stream (the dispatcher cuts it after an error line).
				yield(AuditRecord{}, fmt.Errorf("reading the audit export: %w", err))
				return
			}
			if len(bytes.TrimSpace(line)) > 0 {
				if bytes.HasPrefix(line, []byte(`{"error":true`)) {
					yield(AuditRecord{}, decodeError(&http.Response{StatusCode: http.StatusServiceUnavailable}, line))
					return
				}
				var rec AuditRecord
				if derr := json.Unmarshal(line, &rec); derr != nil {
					yield(AuditRecord{}, fmt.Errorf("decoding an audit record: %w", derr))
					return
				}
				if !yield(rec, nil) {
					return
				}
			}
			if err == io.EOF {
				return
			}
		}
	}
}

// download sends a GET whose answer is read as it arrives (not retried: a caller that saw
// part of it decides). A non-2xx answer is its *APIError.
func (c *Client) download(ctx context.Context, path string, q url.Values, accept string) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeError(resp, raw)
	}
	return resp.Body, nil
}
