package toolcall

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/tool"
)

type bundle struct {
	srv  *httptest.Server
	host string
	got  chan *http.Request
	body chan string
}

func setup(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *bundle {
	t.Helper()
	b := &bundle{got: make(chan *http.Request, 10), body: make(chan string, 10)}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		b.got <- r
		b.body <- string(raw)
		answer(w, r)
	}))
	t.Cleanup(b.srv.Close)
	u, _ := url.Parse(b.srv.URL)
	b.host = u.Host
	return b
}

func weatherTool(base string) tool.Tool {
	t := tool.Tool{Name: "weather", Description: "w", Method: "GET", URLTemplate: base + "/weather/{city}",
		AllowPrivate: true, Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","minLength":2},
			"units":{"type":"string","enum":["c","f"]}},"required":["city"],"additionalProperties":false}`)}
	t.Defaults()
	return t
}

func TestCallBuildsTheRequestFromTheTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"temp":21}`) })
	var iv Invoker
	res, err := iv.Call(context.Background(), weatherTool(b.srv.URL), `{"city":"New York","units":"c"}`, nil, "")
	require.NoError(t, err)
	require.True(t, res.OK, res.Content)
	require.Equal(t, `{"temp":21}`, res.Content)
	r := <-b.got
	require.Equal(t, "/weather/New%20York", r.URL.EscapedPath())
	require.Equal(t, "c", r.URL.Query().Get("units"))
	require.Empty(t, r.Header.Get(HeaderIdempotencyKey))

	post := tool.Tool{Name: "ticket", Description: "t", Method: "POST", URLTemplate: b.srv.URL + "/tickets",
		AllowPrivate: true, SideEffecting: true}
	post.Defaults()
	res, err = iv.Call(context.Background(), post, `{"title":"x","n":2}`, nil, "key-1")
	require.NoError(t, err)
	require.True(t, res.OK)
	r = <-b.got
	<-b.body
	require.Equal(t, "key-1", r.Header.Get(HeaderIdempotencyKey))
	require.JSONEq(t, `{"title":"x","n":2}`, <-b.body)
}

func TestInvalidArgumentsNeverReachTheTool(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) {})
	var iv Invoker
	for _, args := range []string{`{"city":"X"}`, `{"town":"Paris"}`, `not json`, `[1]`, `{"city":"Paris","units":"k"}`} {
		res, err := iv.Call(context.Background(), weatherTool(b.srv.URL), args, nil, "")
		require.NoError(t, err)
		require.False(t, res.OK)
		require.Contains(t, res.Content, "invalid arguments", args)
	}
	require.Empty(t, b.got)
}

func TestToolErrorsAreResults(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "slow") {
			<-r.Context().Done()
			return
		}
		http.Error(w, "boom", http.StatusBadGateway)
	})
	var iv Invoker
	res, err := iv.Call(context.Background(), weatherTool(b.srv.URL), `{"city":"Paris"}`, nil, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Equal(t, http.StatusBadGateway, res.Status)
	require.Contains(t, res.Content, "HTTP 502")

	slow := weatherTool(b.srv.URL)
	slow.TimeoutMS = 50
	res, err = iv.Call(context.Background(), slow, `{"city":"slow"}`, nil, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Contains(t, res.Content, "did not answer within")

	// The run's own end is an error, not a result.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.got; cancel() }()
	_, err = iv.Call(ctx, weatherTool(b.srv.URL), `{"city":"slow"}`, nil, "")
	require.ErrorIs(t, err, context.Canceled)
}

func TestResultsAreTruncatedWithAMarker(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 8000) // 16,000 bytes
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, big) })
	var iv Invoker
	res, err := iv.Call(context.Background(), weatherTool(b.srv.URL), `{"city":"Paris"}`, nil, "")
	require.NoError(t, err)
	require.True(t, res.Truncated)
	require.Equal(t, 16000, res.Bytes)
	require.Contains(t, res.Content, "[truncated: the tool answered 16000 bytes")
	prefix, _, _ := strings.Cut(res.Content, "\n[truncated")
	require.LessOrEqual(t, len(prefix), MaxResultBytes)
	require.True(t, strings.HasPrefix(big, prefix))

	short, cut := Truncate("hello")
	require.False(t, cut)
	require.Equal(t, "hello", short)
}

func TestPrivateDestinationsNeedAllowPrivate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, _ *http.Request) {})
	tl := weatherTool(b.srv.URL)
	tl.AllowPrivate = false
	var iv Invoker
	res, err := iv.Call(context.Background(), tl, `{"city":"Paris"}`, nil, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Contains(t, res.Content, "destination refused")
	require.Empty(t, b.got)
}

func httpRequestTool() tool.Tool {
	t := tool.Tool{Name: tool.HTTPRequest, Kind: tool.KindBuiltin, Description: "fetch",
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"},"method":{"type":"string"}},"required":["url"]}`)}
	t.Defaults()
	return t
}

func TestHTTPRequestNeedsTheOrgAllowlistAndIsSSRFSafe(t *testing.T) {
	t.Parallel()
	var redirectTo string
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, redirectTo, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "page")
	})
	redirectTo = "http://169.254.169.254/latest/meta-data/"
	ht := httpRequestTool()

	// Not on the allowlist, or no allowlist at all: refused before any request.
	var strict Invoker
	res, err := strict.Call(context.Background(), ht, `{"url":"`+b.srv.URL+`/"}`, nil, "")
	require.NoError(t, err)
	require.Contains(t, res.Content, "allowlist")
	res, err = strict.Call(context.Background(), ht, `{"url":"`+b.srv.URL+`/"}`, []string{"api.example.com"}, "")
	require.NoError(t, err)
	require.Contains(t, res.Content, "not on the organisation's allowlist")
	// Allowlisted but loopback: the SSRF guard refuses after resolution.
	res, err = strict.Call(context.Background(), ht, `{"url":"`+b.srv.URL+`/"}`, []string{"127.0.0.1"}, "")
	require.NoError(t, err)
	require.Contains(t, res.Content, "destination refused")
	require.Empty(t, b.got)

	// The operator allows the loopback test server: the call goes through ...
	op := Invoker{AllowPrivate: []string{b.host}}
	res, err = op.Call(context.Background(), ht, `{"url":"`+b.srv.URL+`/"}`, []string{"127.0.0.1"}, "")
	require.NoError(t, err)
	require.True(t, res.OK, res.Content)
	require.Equal(t, "page", res.Content)
	// ... but a redirect to the metadata service is refused on the redirect.
	res, err = op.Call(context.Background(), ht, `{"url":"`+b.srv.URL+`/redirect"}`, []string{"127.0.0.1"}, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Contains(t, res.Content, "169.254.169.254")
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	u := func(s string) *url.URL { x, _ := url.Parse(s); return x }
	list := []string{"api.example.com", "*.svc.example.org", "pay.example.net:8443"}
	require.True(t, HostAllowed(list, u("https://api.example.com/x")))
	require.True(t, HostAllowed(list, u("http://API.example.com:81/")))
	require.True(t, HostAllowed(list, u("https://a.b.svc.example.org/")))
	require.False(t, HostAllowed(list, u("https://svc.example.org/")))
	require.True(t, HostAllowed(list, u("https://pay.example.net:8443/")))
	require.False(t, HostAllowed(list, u("https://pay.example.net/")))
	require.False(t, HostAllowed(list, u("https://evil.com/?api.example.com")))
}

func TestIdempotencyKeyIsCanonical(t *testing.T) {
	t.Parallel()
	a := IdempotencyKey("run", "iter/1/tool/c1", "create_ticket", `{"title":"x","priority":"high"}`)
	b := IdempotencyKey("run", "iter/1/tool/c1", "create_ticket", `{ "priority": "high", "title": "x" }`)
	require.Equal(t, a, b)
	require.NotEqual(t, a, IdempotencyKey("run", "iter/2/tool/c1", "create_ticket", `{"title":"x","priority":"high"}`))
	require.NotEqual(t, a, IdempotencyKey("run2", "iter/1/tool/c1", "create_ticket", `{"title":"x","priority":"high"}`))
	require.NotEqual(t, a, IdempotencyKey("run", "iter/1/tool/c1", "create_ticket", `{"title":"y","priority":"high"}`))
	require.Len(t, a, 64)
}

// failingResolver answers every lookup as the system resolver does for a name that does
// not exist, naming its own address in the error.
type failingResolver struct{ temporary bool }

func (r failingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "127.0.0.53:53",
		IsNotFound: !r.temporary, IsTemporary: r.temporary}
}

// TestNetworkFailuresAreSafeForTheLLM: a DNS or connection failure tells the LLM what
// failed and what it can do, never the executor's resolver or its own addresses; the
// details are in Detail, for the log.
func TestNetworkFailuresAreSafeForTheLLM(t *testing.T) {
	t.Parallel()
	ht := httpRequestTool()
	iv := Invoker{Resolver: failingResolver{}}
	res, err := iv.Call(context.Background(), ht, `{"url":"https://nowhere.example.com/x"}`, []string{"*.example.com"}, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.NotContains(t, res.Content, "127.0.0.53")
	require.NotContains(t, res.Content, "netguard")
	require.Contains(t, res.Content, `"nowhere.example.com" does not exist`)
	require.Contains(t, res.Detail, "127.0.0.53:53", "the log keeps the details")

	iv = Invoker{Resolver: failingResolver{temporary: true}}
	res, err = iv.Call(context.Background(), ht, `{"url":"https://nowhere.example.com/x"}`, []string{"*.example.com"}, "")
	require.NoError(t, err)
	require.NotContains(t, res.Content, "127.0.0.53")
	require.Contains(t, res.Content, "try again")

	// Nothing listens: the http tool's endpoint refuses the connection. Its address is the
	// registry's business, not the LLM's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var plain Invoker
	res, err = plain.Call(context.Background(), weatherTool("http://"+addr), `{"city":"Paris"}`, nil, "")
	require.NoError(t, err)
	require.False(t, res.OK)
	require.NotContains(t, res.Content, addr)
	require.Contains(t, res.Content, "refused the connection")
	require.Contains(t, res.Detail, addr)
}
