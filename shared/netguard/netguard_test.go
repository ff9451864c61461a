package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeResolver answers from a table, and can change its answer after the first lookup to
// simulate DNS rebinding.
type fakeResolver struct {
	answers map[string][]string
	later   map[string][]string // answers from the second lookup on
	calls   atomic.Int64
}

func (f *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	table := f.answers
	if f.calls.Add(1) > 1 && f.later != nil {
		table = f.later
	}
	raw, ok := table[normalizeHost(host)] // as a real resolver, case and root dot do not matter
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, r := range raw {
		out = append(out, netip.MustParseAddr(r))
	}
	return out, nil
}

func newGuard(t *testing.T, cfg Config) *Guard {
	t.Helper()
	g, err := New(cfg)
	require.NoError(t, err)
	return g
}

func requireBlocked(t *testing.T, err error, reason Reason) *BlockedError {
	t.Helper()
	var be *BlockedError
	require.ErrorAs(t, err, &be, "error: %v", err)
	require.Equal(t, reason, be.Reason, "error: %v", err)
	return be
}

func okServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, u string) (string, error) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]Reason{
		"8.8.8.8":                "",
		"2606:4700:4700::1111":   "",
		"::ffff:8.8.8.8":         "",
		"127.0.0.1":              ReasonLoopback,
		"127.255.0.1":            ReasonLoopback,
		"::1":                    ReasonLoopback,
		"::ffff:127.0.0.1":       ReasonLoopback,
		"10.1.2.3":               ReasonPrivate,
		"172.16.0.1":             ReasonPrivate,
		"192.168.1.1":            ReasonPrivate,
		"fc00::1":                ReasonPrivate,
		"fd12:3456::1":           ReasonPrivate,
		"::ffff:10.0.0.1":        ReasonPrivate,
		"169.254.1.1":            ReasonLinkLocal,
		"fe80::1":                ReasonLinkLocal,
		"fe80::1%eth0":           ReasonLinkLocal,
		"100.64.0.1":             ReasonSharedSpace,
		"100.127.255.254":        ReasonSharedSpace,
		"0.0.0.0":                ReasonUnspecified,
		"0.1.2.3":                ReasonUnspecified,
		"::":                     ReasonUnspecified,
		"224.0.0.1":              ReasonMulticast,
		"ff02::1":                ReasonMulticast,
		"255.255.255.255":        ReasonBroadcast,
		"169.254.169.254":        ReasonMetadata,
		"::ffff:169.254.169.254": ReasonMetadata,
		"fd00:ec2::254":          ReasonMetadata,
		"100.100.100.200":        ReasonMetadata,
		"169.254.170.2":          ReasonMetadata,
		"192.0.2.1":              ReasonReserved, // TEST-NET-1
		"198.18.0.1":             ReasonReserved, // benchmarking
		"240.0.0.1":              ReasonReserved,
		"64:ff9b::7f00:1":        ReasonReserved, // NAT64 of 127.0.0.1
		"2002:7f00:1::":          ReasonReserved, // 6to4 of 127.0.0.1
		"2001:db8::1":            ReasonReserved,
		"fec0::1":                ReasonReserved, // deprecated site-local
	} {
		require.Equal(t, want, classify(netip.MustParseAddr(addr)), addr)
	}
}

func TestBlockedByDefault(t *testing.T) {
	t.Parallel()
	srv := okServer(t)
	c := newGuard(t, Config{}).Client()
	_, err := get(t, c, srv.URL)
	be := requireBlocked(t, err, ReasonLoopback)
	require.Equal(t, "127.0.0.1", be.Host)
	require.Equal(t, netip.MustParseAddr("127.0.0.1"), be.IP)
	require.Contains(t, err.Error(), "127.0.0.1 is blocked: loopback")
}

func TestAllowlistedAddress(t *testing.T) {
	t.Parallel()
	srv := okServer(t)
	for _, entry := range []string{"127.0.0.1", "127.0.0.0/8", srv.Listener.Addr().String()} {
		c := newGuard(t, Config{Allow: []string{entry}}).Client()
		body, err := get(t, c, srv.URL)
		require.NoError(t, err, entry)
		require.Equal(t, "ok", body)
	}
	// An entry for another port does not open this one.
	c := newGuard(t, Config{Allow: []string{"127.0.0.1:1"}}).Client()
	_, err := get(t, c, srv.URL)
	requireBlocked(t, err, ReasonLoopback)
}

func TestAllowlistedHostName(t *testing.T) {
	t.Parallel()
	srv := okServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &fakeResolver{answers: map[string][]string{
		"callbacks.internal":       {"127.0.0.1"},
		"a.svc.internal":           {"127.0.0.1"},
		"evil.example.com":         {"127.0.0.1"},
		"meta.svc.internal":        {"169.254.169.254"},
		"metadata.google.internal": {"169.254.169.254"},
	}}
	g := newGuard(t, Config{Resolver: res, Allow: []string{"callbacks.internal", "*.svc.internal"}})
	c := g.Client()
	for _, host := range []string{"callbacks.internal", "CALLBACKS.internal.", "a.svc.internal"} {
		body, err := get(t, c, fmt.Sprintf("http://%s:%d/", host, port))
		require.NoError(t, err, host)
		require.Equal(t, "ok", body)
	}
	_, err := get(t, c, fmt.Sprintf("http://evil.example.com:%d/", port))
	requireBlocked(t, err, ReasonLoopback)
	// A wildcard does not cover the name itself.
	require.Error(t, g.CheckURL(context.Background(), "http://svc.internal/"))
	// An allowlisted name still cannot reach a metadata address.
	requireBlocked(t, g.CheckURL(context.Background(), "http://meta.svc.internal/"), ReasonMetadata)
	// The metadata name is refused by name, before any lookup.
	calls := res.calls.Load()
	requireBlocked(t, g.CheckURL(context.Background(), "http://Metadata.Google.Internal./computeMetadata/v1/"), ReasonMetadata)
	require.Equal(t, calls, res.calls.Load())
}

func TestRedirectToBlockedAddress(t *testing.T) {
	t.Parallel()
	internal := okServer(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/internal":
			http.Redirect(w, r, internal.URL, http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "front")
		}
	}))
	t.Cleanup(front.Close)
	// Only the front server's own address and port are allowlisted.
	c := newGuard(t, Config{Allow: []string{front.Listener.Addr().String()}}).Client()

	body, err := get(t, c, front.URL)
	require.NoError(t, err)
	require.Equal(t, "front", body)

	_, err = get(t, c, front.URL+"/internal")
	be := requireBlocked(t, err, ReasonLoopback)
	require.Equal(t, "127.0.0.1", be.Host)

	_, err = get(t, c, front.URL+"/metadata")
	requireBlocked(t, err, ReasonMetadata)

	_, err = get(t, c, front.URL+"/file")
	requireBlocked(t, err, ReasonScheme)

	_, err = get(t, c, front.URL+"/loop")
	require.ErrorIs(t, err, ErrTooManyRedirects)
}

func TestRedirectLimit(t *testing.T) {
	t.Parallel()
	var hops atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hops.Add(1)
		if r.URL.Query().Get("stop") == fmt.Sprint(n-1) {
			_, _ = io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c := newGuard(t, Config{Allow: []string{"127.0.0.1"}}).Client()
	// Five redirects are followed: the sixth request answers.
	body, err := get(t, c, srv.URL+"/?stop=5")
	require.NoError(t, err)
	require.Equal(t, "done", body)
	hops.Store(0)
	_, err = get(t, c, srv.URL+"/?stop=6")
	require.ErrorIs(t, err, ErrTooManyRedirects)
}

func TestIPv6Loopback(t *testing.T) {
	t.Parallel()
	g := newGuard(t, Config{})
	requireBlocked(t, g.CheckURL(context.Background(), "http://[::1]:8080/"), ReasonLoopback)
	requireBlocked(t, g.CheckURL(context.Background(), "http://[::ffff:127.0.0.1]/"), ReasonLoopback)

	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "six")
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	_, err = get(t, g.Client(), srv.URL)
	requireBlocked(t, err, ReasonLoopback)
	body, err := get(t, newGuard(t, Config{Allow: []string{"::1"}}).Client(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, "six", body)
}

func TestMetadataLiterals(t *testing.T) {
	t.Parallel()
	g := newGuard(t, Config{Allow: []string{"169.254.0.0/16", "100.64.0.0/10"}})
	ctx := context.Background()
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://100.100.100.200/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://metadata.google.internal/computeMetadata/v1/",
	} {
		requireBlocked(t, g.CheckURL(ctx, u), ReasonMetadata)
	}
	// The ranges around them are open, as allowlisted.
	require.NoError(t, g.CheckURL(ctx, "http://169.254.10.10/"))
	// Naming the exact address opens it.
	open := newGuard(t, Config{Allow: []string{"169.254.169.254:80"}})
	require.NoError(t, open.CheckURL(ctx, "http://169.254.169.254/"))
	requireBlocked(t, open.CheckURL(ctx, "http://169.254.169.254:8080/"), ReasonMetadata)
}

func TestLocalhostResolvesToLoopback(t *testing.T) {
	t.Parallel()
	srv := okServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	g := newGuard(t, Config{}) // the real resolver: localhost comes from /etc/hosts
	requireBlocked(t, g.CheckURL(context.Background(), "http://localhost/"), ReasonLoopback)
	_, err := get(t, g.Client(), fmt.Sprintf("http://localhost:%d/", port))
	requireBlocked(t, err, ReasonLoopback)
}

func TestDNSRebinding(t *testing.T) {
	t.Parallel()
	srv := okServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	// Public at check time, loopback when the client connects.
	res := &fakeResolver{
		answers: map[string][]string{"rebind.example": {"93.184.215.14"}},
		later:   map[string][]string{"rebind.example": {"127.0.0.1"}},
	}
	g := newGuard(t, Config{Resolver: res})
	u := fmt.Sprintf("http://rebind.example:%d/", port)
	require.NoError(t, g.CheckURL(context.Background(), u))
	_, err := get(t, g.Client(), u)
	be := requireBlocked(t, err, ReasonLoopback)
	require.Equal(t, "rebind.example", be.Host)
	require.Contains(t, err.Error(), "rebind.example (127.0.0.1) is blocked: loopback")
}

func TestMixedAnswerRefused(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{"mixed.example": {"93.184.215.14", "10.0.0.1"}}}
	g := newGuard(t, Config{Resolver: res})
	requireBlocked(t, g.CheckURL(context.Background(), "https://mixed.example/"), ReasonPrivate)
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{"public.example": {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"}}}
	g := newGuard(t, Config{Resolver: res})
	ctx := context.Background()
	require.NoError(t, g.CheckURL(ctx, "https://public.example/hook?x=1"))
	require.NoError(t, g.CheckURL(ctx, "http://8.8.8.8:8080/"))
	requireBlocked(t, g.CheckURL(ctx, "ftp://public.example/"), ReasonScheme)
	requireBlocked(t, g.CheckURL(ctx, "gopher://127.0.0.1/"), ReasonScheme)
	requireBlocked(t, g.CheckURL(ctx, "http://10.0.0.1/"), ReasonPrivate)
	requireBlocked(t, g.CheckURL(ctx, "http://0.0.0.0:8080/"), ReasonUnspecified)
	require.ErrorIs(t, g.CheckURL(ctx, "http:///nohost"), ErrInvalidURL)
	require.ErrorIs(t, g.CheckURL(ctx, "://bad"), ErrInvalidURL)
	var dnsErr *net.DNSError
	require.ErrorAs(t, g.CheckURL(ctx, "http://unknown.example/"), &dnsErr)
}

func TestClientRefusesOtherSchemes(t *testing.T) {
	t.Parallel()
	c := newGuard(t, Config{}).Client()
	_, err := c.Get("ftp://example.com/file")
	requireBlocked(t, err, ReasonScheme)
	var ue *url.Error
	require.True(t, errors.As(err, &ue))
}

func TestDialContextDirect(t *testing.T) {
	t.Parallel()
	g := newGuard(t, Config{})
	_, err := g.DialContext(context.Background(), "tcp", "127.0.0.1:9")
	requireBlocked(t, err, ReasonLoopback)
	_, err = g.DialContext(context.Background(), "udp", "8.8.8.8:53")
	require.ErrorContains(t, err, `network "udp" is not allowed`)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "host:99999", "host:0", "*", "a b", "[::1]:x"} {
		_, err := New(Config{Allow: []string{bad}})
		require.Error(t, err, bad)
	}
	_, err := New(Config{Allow: []string{"", " api.example.com ", "[::1]:8080", "fd00::/8", "*.x.example"}})
	require.NoError(t, err)
}
