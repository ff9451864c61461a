package api

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Usage and audit (role admin): GET /api/v1/admin/usage (JSON or CSV) and
// GET /api/v1/admin/audit (JSON Lines, streamed). Both read the usage ledger of the
// caller's organisation only.

// maxUsageSpan bounds a usage report's period (its daily series grow with it); the audit
// export is streamed and has no bound.
const maxUsageSpan = 366 * 24 * time.Hour

// period is [from, to) of a usage or audit request.
type period struct {
	from, to time.Time
	month    string // YYYY-MM when asked for with month=
}

// parsePeriod reads month= or from=/to= (RFC 3339 or YYYY-MM-DD, a date being its
// midnight UTC; to is exclusive, default now; from defaults to the start of the current
// month). Without any of them the period is the current calendar month. Each problem is a
// 400 naming its parameter.
func parsePeriod(c echo.Context, now time.Time, maxSpan time.Duration) (period, error) {
	now = now.UTC()
	m, f, t := c.QueryParam("month"), c.QueryParam("from"), c.QueryParam("to")
	if m == "" && f == "" && t == "" {
		m = now.Format("2006-01")
	}
	if m != "" {
		if f != "" || t != "" {
			return period{}, badQuery("month", "give month or from and to, not both")
		}
		start, err := time.Parse("2006-01", m)
		if err != nil {
			return period{}, badQuery("month", "must be YYYY-MM")
		}
		return period{from: start, to: start.AddDate(0, 1, 0), month: m}, nil
	}
	p := period{from: time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), to: now}
	var err error
	if f != "" {
		if p.from, err = parseInstant(f); err != nil {
			return period{}, badQuery("from", err.Error())
		}
	}
	if t != "" {
		if p.to, err = parseInstant(t); err != nil {
			return period{}, badQuery("to", err.Error())
		}
	}
	if !p.to.After(p.from) {
		return period{}, badQuery("to", "must be after from ("+p.from.Format(time.RFC3339)+")")
	}
	if maxSpan > 0 && p.to.Sub(p.from) > maxSpan {
		return period{}, badQuery("to", "must be at most 366 days after from; the audit export has no such bound")
	}
	return p, nil
}

func parseInstant(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("must be an RFC 3339 time (2026-11-01T00:00:00Z) or a date (2026-11-01)")
}

// pseudonymiser reads pseudonymise= and returns the function user ids go through: the
// organisation's keyed pseudonym, or the id itself.
func (s *Server) pseudonymiser(c echo.Context) (func(string) string, bool, error) {
	v := c.QueryParam("pseudonymise")
	if v == "" {
		return func(u string) string { return u }, false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return nil, false, badQuery("pseudonymise", "must be true or false")
	}
	if !on {
		return func(u string) string { return u }, false, nil
	}
	fn, err := store.Pseudonymiser(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return nil, false, dispatchDBError(err)
	}
	return fn, true, nil
}

// wantsCSV reads format= (json or csv), falling back on the Accept header.
func wantsCSV(c echo.Context) (bool, error) {
	switch c.QueryParam("format") {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
		for _, part := range strings.Split(c.Request().Header.Get(echo.HeaderAccept), ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/csv" {
				return true, nil
			}
		}
		return false, nil
	}
	return false, badQuery("format", "must be json or csv")
}

func (s *Server) usage(c echo.Context) error {
	p, err := parsePeriod(c, time.Now(), maxUsageSpan)
	if err != nil {
		return err
	}
	users := 20
	if v := c.QueryParam("users"); v != "" {
		if users, err = strconv.Atoi(v); err != nil || users < 1 || users > 1000 {
			return badQuery("users", "must be a whole number from 1 to 1000")
		}
	}
	asCSV, err := wantsCSV(c)
	if err != nil {
		return err
	}
	pseud, pseudonymised, err := s.pseudonymiser(c)
	if err != nil {
		return err
	}
	if asCSV {
		return s.usageCSV(c, p, pseud)
	}
	ctx := c.Request().Context()
	orgID := principal(c).OrgID
	u, err := store.Usage(ctx, s.DB, orgID, p.from, p.to, users, pseud)
	if err != nil {
		return dispatchDBError(err)
	}
	u.Month, u.Pseudonymised = p.month, pseudonymised
	org, err := store.GetOrg(ctx, s.DB, orgID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return dispatchDBError(err)
	}
	now := time.Now().UTC()
	u.MonthlyTokenQuota = org.MonthlyTokenQuota
	u.ThisMonth = apitypes.UsageMonth{Month: now.Format("2006-01"), MonthlyTokenQuota: org.MonthlyTokenQuota}
	if u.ThisMonth.Tokens, err = store.MonthlyTokens(ctx, s.DB, orgID, now); err != nil {
		return dispatchDBError(err)
	}
	if u.ThisMonth.CostUSD, err = store.MonthlyCost(ctx, s.DB, orgID, now); err != nil {
		return dispatchDBError(err)
	}
	u.ThisMonth.MonthlyBudgetUSD = org.MonthlyCostBudgetUSD
	return c.JSON(http.StatusOK, u)
}

// usageHeader is the CSV's first line.
var usageHeader = []string{"day", "job_type", "provider", "model", "user_id", "tokens_in", "tokens_out",
	"tokens_cached", "tokens", "cost_usd", "calls", "unknown_calls"}

// usageCSV streams the period's usage by day, skill, provider, model and user.
func (s *Server) usageCSV(c echo.Context, p period, pseud func(string) string) error {
	st := newDownload(c, s.Log, "text/csv; charset=utf-8",
		fmt.Sprintf("usage-%s-%s.csv", p.from.Format("20060102T150405Z"), p.to.Format("20060102T150405Z")))
	w := csv.NewWriter(st.w)
	rec := make([]string, len(usageHeader))
	err := store.UsageRows(c.Request().Context(), s.DB, principal(c).OrgID, p.from, p.to, func(r *store.UsageRow) error {
		if st.rows == 0 {
			st.start()
			if err := w.Write(usageHeader); err != nil {
				return err
			}
		}
		st.rows++
		rec[0], rec[1], rec[2], rec[3], rec[4] = r.Day, csvText(r.JobType), csvText(r.Provider), csvText(r.Model), csvText(pseud(r.UserID))
		rec[5], rec[6], rec[7], rec[8] = itoa(r.TokensIn), itoa(r.TokensOut), itoa(r.TokensCached), itoa(r.Tokens)
		rec[9], rec[10], rec[11] = strconv.FormatFloat(r.CostUSD, 'f', -1, 64), itoa(r.Calls), itoa(r.UnknownCalls)
		return w.Write(rec)
	})
	if err == nil && st.rows == 0 {
		st.start()
		err = w.Write(usageHeader)
	}
	w.Flush()
	return st.end(cmpErr(err, w.Error()), nil)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// csvText keeps a spreadsheet from reading a value as a formula (OWASP's CSV injection):
// user ids and skill names are the callers' text.
func csvText(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// audit streams GET /api/v1/admin/audit: one JSON line per LLM call of the period.
func (s *Server) audit(c echo.Context) error {
	p, err := parsePeriod(c, time.Now(), 0)
	if err != nil {
		return err
	}
	pseud, _, err := s.pseudonymiser(c)
	if err != nil {
		return err
	}
	st := newDownload(c, s.Log, "application/x-ndjson", fmt.Sprintf("audit-%s-%s.jsonl",
		p.from.Format("20060102T150405Z"), p.to.Format("20060102T150405Z")))
	enc := json.NewEncoder(st.w)
	err = store.AuditRecords(c.Request().Context(), s.DB, principal(c).OrgID, p.from, p.to, func(r *store.AuditRecord) error {
		if st.rows == 0 {
			st.start()
		}
		st.rows++
		r.UserID = pseud(r.UserID)
		return enc.Encode(r)
	})
	if err == nil && st.rows == 0 {
		st.start()
	}
	return st.end(err, func(e *apierr.Error) { _ = enc.Encode(e.Body()) })
}

// download writes a long answer through a buffer, so that neither the dispatcher nor
// Postgres holds more than a buffer of it: rows go out as they are read.
type download struct {
	c       echo.Context
	log     *slog.Logger
	w       *bufio.Writer
	rows    int64
	started bool
}

func newDownload(c echo.Context, log *slog.Logger, contentType, filename string) *download {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, contentType)
	h.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(echo.HeaderCacheControl, "no-store")
	return &download{c: c, log: log, w: bufio.NewWriterSize(c.Response(), 64<<10)}
}

// start sends the status line and headers: from then on an error cannot be an answer.
func (st *download) start() {
	st.started = true
	st.c.Response().WriteHeader(http.StatusOK)
}

// end flushes the stream. An error before anything was sent is the answer; after, the
// error is written as a last line (when the format has one) and the connection is cut
// (http.ErrAbortHandler), so that no client takes a partial stream for a whole one.
func (st *download) end(err error, lastLine func(*apierr.Error)) error {
	if err == nil {
		return st.w.Flush()
	}
	ae := dispatchDBError(err)
	if !st.started {
		return ae
	}
	if lastLine != nil {
		lastLine(ae)
	}
	_ = st.w.Flush()
	st.c.Response().Flush() // the error line whole, before the cut
	st.log.Error("download cut short", "path", st.c.Path(), "rows", st.rows, "error", err)
	panic(http.ErrAbortHandler)
}
