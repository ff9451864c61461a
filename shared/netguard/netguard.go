// Package netguard keeps outbound HTTP requests made on a tenant's behalf (the dispatcher's
// callbacks, the executor's http_request tool) away from internal networks: loopback,
// private and link-local ranges, cloud metadata services and every other address that is not
// publicly routable, unless an operator allowlists them.
//
// The check runs on the address actually dialled, after DNS resolution, inside the dialer:
// the name is resolved once, every address is checked, and the checked address is the one
// connected to, so a DNS answer that changes between a check and the connection (DNS
// rebinding) cannot slip through. Redirects dial through the same dialer and are limited in
// number and scheme. Proxies from the environment are ignored: dialling a proxy would check
// the proxy's address instead of the target's.
//
// The IANA special-purpose ranges come from code.dny.dev/ssrf, whose lists are generated
// from the registries; this package adds the reasons, the metadata services, the allowlist
// and the HTTP plumbing.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// Errors besides *BlockedError.
var (
	// ErrTooManyRedirects is returned (wrapped in *url.Error by http.Client) when a response
	// chain exceeds Config.MaxRedirects.
	ErrTooManyRedirects = errors.New("netguard: too many redirects")
	// ErrInvalidURL means a URL given to CheckURL has no host or cannot be parsed.
	ErrInvalidURL = errors.New("netguard: invalid URL")
)

// BlockedError says a destination was refused. Its text names the host, the address and
// the reason, none of which is secret; callers map it to their own error code (for example
// CALLBACK_URL_BLOCKED) with errors.As.
type BlockedError struct {
	// Host is the host name or address literal that was asked for.
	Host string
	// IP is the address that was refused; invalid when the refusal came before resolution
	// (a blocked scheme or metadata host name).
	IP netip.Addr
	// Reason is why.
	Reason Reason
}

// Error implements error.
func (e *BlockedError) Error() string {
	if e.IP.IsValid() && e.IP.String() != e.Host {
		return fmt.Sprintf("netguard: %s (%s) is blocked: %s", e.Host, e.IP, e.Reason)
	}
	return fmt.Sprintf("netguard: %s is blocked: %s", e.Host, e.Reason)
}

// Resolver looks up a host's addresses; *net.Resolver implements it. Tests substitute one to
// simulate DNS answers without a DNS server.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Guard. The zero value blocks every non-public address.
type Config struct {
	// Allow lists destinations reachable even though they are not public:
	//
	//	api.internal            a host name, any port
	//	api.internal:8443       a host name, one port
	//	*.svc.internal          every name below svc.internal
	//	10.0.0.5  10.0.0.5:80   an address, any port or one ([::1]:80 for IPv6)
	//	10.0.0.0/8  fd00::/8    a range, any port
	//
	// An allowlisted host name is trusted with whatever its DNS answers, except a metadata
	// address, which only an entry naming that exact address opens. Default: none.
	Allow []string
	// Resolver resolves host names. Default: net.DefaultResolver.
	Resolver Resolver
	// MaxRedirects is how many redirects Client follows. Default 5; negative means none.
	MaxRedirects int
	// DialTimeout bounds one TCP connect. Default 10s.
	DialTimeout time.Duration
	// Timeout is Client's overall request timeout (http.Client.Timeout). Default 30s.
	Timeout time.Duration
}

// Guard checks destinations against the blocked ranges and the allowlist. It is safe for
// concurrent use.
type Guard struct {
	allow        allowlist
	resolver     Resolver
	maxRedirects int
	dialTimeout  time.Duration
	timeout      time.Duration
}

// New validates cfg and returns a Guard.
func New(cfg Config) (*Guard, error) {
	allow, err := parseAllowlist(cfg.Allow)
	if err != nil {
		return nil, fmt.Errorf("netguard config: %w", err)
	}
	g := &Guard{
		allow:        allow,
		resolver:     cfg.Resolver,
		maxRedirects: cfg.MaxRedirects,
		dialTimeout:  cfg.DialTimeout,
		timeout:      cfg.Timeout,
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	switch {
	case g.maxRedirects == 0:
		g.maxRedirects = 5
	case g.maxRedirects < 0:
		g.maxRedirects = 0
	}
	if g.dialTimeout <= 0 {
		g.dialTimeout = 10 * time.Second
	}
	if g.timeout <= 0 {
		g.timeout = 30 * time.Second
	}
	return g, nil
}

// checkName refuses host names that are blocked whatever they resolve to.
func (g *Guard) checkName(host string, port uint16) error {
	if metadataNames[normalizeHost(host)] && !g.allow.allowsHost(normalizeHost(host), port) {
		return &BlockedError{Host: host, Reason: ReasonMetadata}
	}
	return nil
}

// checkIP refuses ip unless it is public or allowlisted. hostAllowed says the host name was
// allowlisted, which opens every address but a metadata service's.
func (g *Guard) checkIP(host string, ip netip.Addr, port uint16, hostAllowed bool) error {
	reason := classify(ip)
	if reason == "" || g.allow.allowsIP(ip, port) || hostAllowed && reason != ReasonMetadata {
		return nil
	}
	return &BlockedError{Host: host, IP: ip, Reason: reason}
}

// resolve returns the addresses to dial for host, every one of them checked. One blocked
// address refuses the whole name: a name answering with both a public and an internal
// address is how rebinding attacks look.
func (g *Guard) resolve(ctx context.Context, network, host string, port uint16) ([]netip.Addr, bool, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, false, g.checkIP(host, ip, port, false)
	}
	if err := g.checkName(host, port); err != nil {
		return nil, false, err
	}
	hostAllowed := g.allow.allowsHost(normalizeHost(host), port)
	ipNet := "ip"
	switch network {
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	}
	ips, err := g.resolver.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, false, fmt.Errorf("netguard: resolving %s: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, false, fmt.Errorf("netguard: resolving %s: no addresses", host)
	}
	for _, ip := range ips {
		if err := g.checkIP(host, ip, port, hostAllowed); err != nil {
			return nil, false, err
		}
	}
	return ips, hostAllowed, nil
}

// DialContext connects like net.Dialer.DialContext, to TCP destinations that pass the
// guard only. It has the signature of http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("netguard: network %q is not allowed", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: bad port", address)
	}
	ips, hostAllowed, err := g.resolve(ctx, network, host, uint16(port))
	if err != nil {
		return nil, err
	}
	d := net.Dialer{
		Timeout:   g.dialTimeout,
		KeepAlive: 30 * time.Second,
		// Checked again on the socket's own address, so nothing between resolve and connect
		// (now or after a future change to this function) can swap the destination.
		Control: func(_, addr string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return fmt.Errorf("netguard: dial %s: %w", addr, err)
			}
			return g.checkIP(host, ap.Addr(), ap.Port(), hostAllowed)
		},
	}
	var lastErr error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// Transport returns a new http.Transport (http.DefaultTransport's settings) that dials
// through the guard and ignores proxy settings. It does not check the scheme; Client does.
func (g *Guard) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = g.DialContext
	t.DialTLSContext = nil
	return t
}

// Client returns a new http.Client whose every connection, including those of redirects,
// goes through the guard, that refuses schemes other than http and https, and that follows
// at most Config.MaxRedirects redirects. Errors come wrapped in *url.Error; use errors.As to
// find a *BlockedError.
func (g *Guard) Client() *http.Client {
	return &http.Client{
		Transport:     schemeGuard{next: g.Transport()},
		CheckRedirect: g.CheckRedirect,
		Timeout:       g.timeout,
	}
}

// CheckRedirect is an http.Client.CheckRedirect: it limits the number of redirects, refuses
// schemes other than http and https, and refuses blocked address literals and host names
// before any connection is tried (the dialer still checks resolved addresses).
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > g.maxRedirects {
		return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, g.maxRedirects)
	}
	if err := checkScheme(req.URL); err != nil {
		return err
	}
	host := req.URL.Hostname()
	port := urlPort(req.URL)
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.checkIP(host, ip, port, false)
	}
	return g.checkName(host, port)
}

// CheckURL validates a URL before it is stored or used (a callback_url at dispatch time):
// http or https, a host, and every address the host resolves to now allowed. Passing does
// not make later requests safe by itself (DNS can change); Client checks again on dial.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if err := checkScheme(u); err != nil {
		return err
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	_, _, err = g.resolve(ctx, "tcp", host, urlPort(u))
	return err
}

func checkScheme(u *url.URL) error {
	switch u.Scheme {
	case "http", "https":
		return nil
	}
	return &BlockedError{Host: u.Host, Reason: ReasonScheme}
}

// urlPort is the URL's port, or the scheme's default.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// schemeGuard refuses requests whose scheme is not http or https with a BlockedError, before
// the transport sees them (a transport may have other protocols registered).
type schemeGuard struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (s schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkScheme(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, err
	}
	return s.next.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (s schemeGuard) CloseIdleConnections() {
	if c, ok := s.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
