// Package toolcall performs one call of a registered tool on behalf of a run: it validates
// the arguments against the tool's JSON Schema, builds the HTTP request from the tool's
// method and URL template (or runs the built-in http_request tool inside the
// organisation's allowlist), keeps every connection away from internal networks unless the
// tool or the operator allows them, and turns the answer — or the failure — into the text
// the LLM reads. It knows nothing of journals or ledgers; the runner wraps it.
package toolcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchyard-ai/switchyard/shared/netguard"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// MaxResultBytes is how much of a tool's answer the LLM sees; the rest is cut with a
// visible marker so the model knows it is reading a prefix.
const MaxResultBytes = 10 << 10

// maxReadBytes bounds how much of an answer is read at all.
const maxReadBytes = 4 << 20

// HeaderIdempotencyKey is the header a side-effecting tool receives.
const HeaderIdempotencyKey = "Idempotency-Key"

// Result is what a call produced for the LLM.
type Result struct {
	// Content is the tool message's content: the answer, or an error the LLM can act on.
	Content string `json:"content"`
	// OK is false when the call was refused or failed; Content says why.
	OK bool `json:"ok"`
	// Status is the HTTP status of the tool's answer, 0 when no request was made.
	Status int `json:"status,omitempty"`
	// Truncated says Content was cut at MaxResultBytes.
	Truncated bool `json:"truncated,omitempty"`
	// Bytes is the size of the whole answer.
	Bytes int `json:"bytes,omitempty"`
	// Detail is what went wrong, in full, for the operator's log when Content is a
	// summary safe for the LLM (a network failure); never journaled nor shown to the LLM.
	Detail string `json:"-"`
}

// Failed returns a Result carrying an error message for the LLM.
func Failed(format string, args ...any) Result {
	return Result{Content: "error: " + fmt.Sprintf(format, args...)}
}

// Invoker calls tools. The zero value is ready; it is safe for concurrent use.
type Invoker struct {
	// AllowPrivate is the operator's netguard allowlist for every tool call (for example an
	// internal service the http_request tool may reach); default none.
	AllowPrivate []string
	// Resolver substitutes DNS in tests; default the system resolver.
	Resolver netguard.Resolver

	mu      sync.Mutex
	clients map[string]*http.Client
	schemas map[string]*jsonschema.Schema
}

// Call validates args (the JSON the LLM wrote) and performs the call. orgAllow is the
// organisation's http_request allowlist; idemKey, when set, is sent as Idempotency-Key.
// Failures of the tool or of the LLM's arguments are Results, not errors: they go back to
// the LLM. The error is only ctx's, when the run was cancelled or timed out meanwhile.
func (iv *Invoker) Call(ctx context.Context, t tool.Tool, args string, orgAllow []string, idemKey string) (Result, error) {
	parsed, err := iv.Validate(t, args)
	if err != nil {
		return Failed("invalid arguments for %s: %v", t.Name, err), nil
	}
	runCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, t.Timeout())
	defer cancel()
	var req *http.Request
	var client *http.Client
	switch t.Kind {
	case tool.KindBuiltin:
		req, client, err = iv.httpRequest(ctx, parsed, orgAllow)
	default:
		req, client, err = iv.httpTool(ctx, t, parsed)
	}
	if err != nil {
		return Failed("%s: %v", t.Name, err), nil
	}
	if idemKey != "" {
		req.Header.Set(HeaderIdempotencyKey, idemKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		// The run's end (cancelled, timed out) is an error; the tool's own timeout is a
		// result the LLM can act on.
		if runCtx.Err() != nil {
			return Result{}, runCtx.Err()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Failed("%s did not answer within %s", t.Name, t.Timeout()), nil
		}
		var blocked *netguard.BlockedError
		if errors.As(err, &blocked) {
			return Failed("%s: destination refused: %v", t.Name, blocked), nil
		}
		return networkFailure(t, req.URL, "the request failed", err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBytes))
	if err != nil {
		if runCtx.Err() != nil {
			return Result{}, runCtx.Err()
		}
		return networkFailure(t, req.URL, "reading the answer failed", err), nil
	}
	content, truncated := Truncate(string(body))
	res := Result{Content: content, OK: resp.StatusCode < 300, Status: resp.StatusCode, Truncated: truncated, Bytes: len(body)}
	if !res.OK {
		res.Content = fmt.Sprintf("error: %s answered HTTP %d: %s", t.Name, resp.StatusCode, content)
	}
	return res, nil
}

// networkFailure is the Result of a call that failed below HTTP. The LLM reads what failed
// and what it can do about it, in words that name nothing of the executor's network — the
// text of a network error names the resolver's address ("lookup x on 127.0.0.53:53") or
// the executor's own ("read tcp 10.0.0.5:43210->…") — nor the endpoint of a registered
// tool, which the LLM never saw. Detail keeps the error for the log.
func networkFailure(t tool.Tool, u *url.URL, what string, err error) Result {
	// The LLM chose the URL of http_request and may hear its host; a registered tool's
	// endpoint is the registry's.
	where := "the tool's endpoint"
	if t.Kind == tool.KindBuiltin {
		where = strconv.Quote(u.Host)
	}
	var why string
	var dns *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		why = fmt.Sprintf("the host %q does not exist (DNS knows no such name); check the host name in the URL", dns.Name)
		if t.Kind != tool.KindBuiltin {
			why = "the tool's host name does not resolve; the tool is misconfigured, so use another way or report it"
		}
	case errors.As(err, &dns):
		why = "the host name could not be resolved right now (a temporary DNS failure); try again later"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = where + " refused the connection (nothing is listening there); the service may be down, try again later"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		why = "the connection to " + where + " was closed before the answer was complete; try again"
	case errors.Is(err, netguard.ErrTooManyRedirects):
		why = "the answer redirected too many times; the URL is likely wrong"
	case isTLS(err):
		why = "the TLS certificate of " + where + " was not accepted, so nothing was sent; use a URL whose certificate is valid"
	case errors.As(err, &netErr) && netErr.Timeout():
		why = "connecting to " + where + " timed out; try again later"
	default:
		why = "a network error occurred before " + where + " answered; try again later"
	}
	r := Failed("%s: %s: %s", t.Name, what, why)
	r.Detail = redact(err).Error()
	return r
}

func isTLS(err error) bool {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	return errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record)
}

// redact drops the URL from a *url.Error: a tool's URL may carry a secret in its query.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Truncate cuts s at MaxResultBytes (on a rune boundary) and appends a marker saying so.
func Truncate(s string) (string, bool) {
	if len(s) <= MaxResultBytes {
		return s, false
	}
	cut := MaxResultBytes
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: the tool answered %d bytes; only the first %d are shown]", len(s), cut), true
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Validate parses the LLM's arguments and checks them against the tool's schema.
func (iv *Invoker) Validate(t tool.Tool, args string) (map[string]any, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %v", err)
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	sch, err := iv.schema(t)
	if err != nil {
		return nil, err
	}
	if err := sch.Validate(inst); err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return obj, nil
}

func (iv *Invoker) schema(t tool.Tool) (*jsonschema.Schema, error) {
	sum := sha256.Sum256(t.Parameters)
	key := t.Name + ":" + hex.EncodeToString(sum[:8])
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if s, ok := iv.schemas[key]; ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.Parameters))
	if err != nil {
		return nil, fmt.Errorf("the tool's parameters are not a JSON Schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	loc := "tool://" + t.Name + "/parameters.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("the tool's parameters are not a JSON Schema: %v", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("the tool's parameters are not a valid JSON Schema: %v", err)
	}
	if iv.schemas == nil {
		iv.schemas = map[string]*jsonschema.Schema{}
	}
	iv.schemas[key] = s
	return s, nil
}

var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// httpTool builds the request of a registered http tool.
func (iv *Invoker) httpTool(ctx context.Context, t tool.Tool, args map[string]any) (*http.Request, *http.Client, error) {
	rest := make(map[string]any, len(args))
	for k, v := range args {
		rest[k] = v
	}
	var missing []string
	raw := placeholder.ReplaceAllStringFunc(t.URLTemplate, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := args[name]
		if !ok {
			missing = append(missing, name)
			return ""
		}
		delete(rest, name)
		return url.PathEscape(scalar(v))
	})
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("arguments %v are needed to build the URL", missing)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("bad URL: %v", err)
	}
	var body io.Reader
	switch t.Method {
	case http.MethodGet, http.MethodDelete:
		q := u.Query()
		keys := make([]string, 0, len(rest))
		for k := range rest {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			q.Set(k, scalar(rest[k]))
		}
		u.RawQuery = q.Encode()
	default:
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, u.String(), body)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	var allow []string
	if t.AllowPrivate {
		allow = []string{u.Host}
	}
	client, err := iv.client(allow, nil)
	return req, client, err
}

// scalar is an argument's text in a URL: strings as they are, anything else as JSON.
func scalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// httpRequest builds the request of the built-in http_request tool: a URL whose host is on
// the organisation's allowlist, checked again on every redirect.
func (iv *Invoker) httpRequest(ctx context.Context, args map[string]any, orgAllow []string) (*http.Request, *http.Client, error) {
	raw, _ := args["url"].(string)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("url must be an absolute http or https URL")
	}
	if len(orgAllow) == 0 {
		return nil, nil, fmt.Errorf("the organisation allows no destinations (orgs.http_allowlist is empty)")
	}
	if !HostAllowed(orgAllow, u) {
		return nil, nil, fmt.Errorf("%s is not on the organisation's allowlist", u.Host)
	}
	method, _ := args["method"].(string)
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if b, ok := args["body"].(string); ok && b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), u.String(), body)
	if err != nil {
		return nil, nil, err
	}
	if h, ok := args["headers"].(map[string]any); ok {
		for k, v := range h {
			if s, ok := v.(string); ok {
				req.Header.Set(k, s)
			}
		}
	}
	client, err := iv.client(nil, orgAllow)
	return req, client, err
}

// client returns a netguard client that may reach the private destinations of allow,
// and — when hosts is set — follows redirects only to hosts on that allowlist.
func (iv *Invoker) client(allow, hosts []string) (*http.Client, error) {
	allow = append(append([]string(nil), iv.AllowPrivate...), allow...)
	key := strings.Join(allow, ",") + "|" + strings.Join(hosts, ",")
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if c, ok := iv.clients[key]; ok {
		return c, nil
	}
	g, err := netguard.New(netguard.Config{Allow: allow, Resolver: iv.Resolver})
	if err != nil {
		return nil, err
	}
	c := g.Client()
	c.Timeout = 0 // each call has its tool's timeout on its context
	if hosts != nil {
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if err := g.CheckRedirect(req, via); err != nil {
				return err
			}
			if !HostAllowed(hosts, req.URL) {
				return fmt.Errorf("redirect to %s, which is not on the organisation's allowlist", req.URL.Host)
			}
			return nil
		}
	}
	if iv.clients == nil {
		iv.clients = map[string]*http.Client{}
	}
	iv.clients[key] = c
	return c, nil
}

// HostAllowed reports whether u's host matches an allowlist entry: "api.example.com" (any
// port), "api.example.com:8443" (one port), or "*.example.com" (every name below it).
func HostAllowed(list []string, u *url.URL) bool {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, e := range list {
		e = strings.ToLower(strings.TrimSpace(e))
		ehost, eport := e, ""
		if i := strings.LastIndex(e, ":"); i > 0 && !strings.Contains(e[i+1:], "]") && !strings.HasSuffix(e, "]") {
			ehost, eport = e[:i], e[i+1:]
		}
		ehost = strings.Trim(ehost, "[]")
		if eport != "" && eport != port {
			continue
		}
		if suffix, ok := strings.CutPrefix(ehost, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if host == ehost {
			return true
		}
	}
	return false
}

// IdempotencyKey is the key of a side-effecting call: a hash of the run, the step path,
// the tool and the canonical arguments (keys sorted, no insignificant space), so the same
// call of the same step always has the same key and any other call a different one.
func IdempotencyKey(runID, step, toolName, args string) string {
	h := sha256.New()
	for _, p := range []string{runID, step, toolName, Canonical(args)} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Canonical re-encodes JSON with sorted keys; text that is not JSON is returned as is.
func Canonical(s string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}
