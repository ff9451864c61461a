package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// allowlist holds the parsed Config.Allow entries.
type allowlist struct {
	hosts    []hostRule
	prefixes []prefixRule
}

// hostRule allows a host name (or, with wildcard, every name below it) on one port or any.
type hostRule struct {
	name     string
	wildcard bool
	port     uint16 // 0 = any
}

// prefixRule allows an address range on one port or any.
type prefixRule struct {
	prefix netip.Prefix
	port   uint16 // 0 = any
}

// parseAllowlist reads entries of the forms
//
//	api.example.com          host name, any port
//	api.example.com:8443     host name, one port
//	*.svc.example.com        every name below svc.example.com (not the name itself)
//	10.0.0.5  10.0.0.5:8080  one IPv4 address, any port or one
//	::1  [::1]:8080          one IPv6 address (brackets required with a port)
//	10.0.0.0/8  fd00::/8     an address range, any port
func parseAllowlist(entries []string) (allowlist, error) {
	var a allowlist
	for i, raw := range entries {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return a, fmt.Errorf("Allow[%d] %q: not a CIDR range: %w", i, raw, err)
			}
			a.prefixes = append(a.prefixes, prefixRule{prefix: p.Masked()})
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.prefixes = append(a.prefixes, prefixRule{prefix: netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())})
			continue
		}
		host, port := e, uint16(0)
		if h, p, err := net.SplitHostPort(e); err == nil {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return a, fmt.Errorf("Allow[%d] %q: bad port %q", i, raw, p)
			}
			host, port = h, uint16(n)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			a.prefixes = append(a.prefixes, prefixRule{prefix: netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()), port: port})
			continue
		}
		host = normalizeHost(host)
		wildcard := strings.HasPrefix(host, "*.")
		name := strings.TrimPrefix(host, "*.")
		if name == "" || strings.ContainsAny(name, "*/ []") {
			return a, fmt.Errorf("Allow[%d] %q: not a host name, address or range", i, raw)
		}
		a.hosts = append(a.hosts, hostRule{name: name, wildcard: wildcard, port: port})
	}
	return a, nil
}

// allowsHost reports whether a host name (already normalised) on port is allowlisted.
func (a allowlist) allowsHost(host string, port uint16) bool {
	for _, r := range a.hosts {
		if r.port != 0 && r.port != port {
			continue
		}
		if r.wildcard && strings.HasSuffix(host, "."+r.name) || !r.wildcard && host == r.name {
			return true
		}
	}
	return false
}

// allowsIP reports whether ip on port is allowlisted. A metadata address is only allowed by
// an entry naming exactly that address: allowlisting 169.254.0.0/16 for a link-local
// service must not also open the credentials endpoint.
func (a allowlist) allowsIP(ip netip.Addr, port uint16) bool {
	ip = ip.Unmap().WithZone("")
	for _, r := range a.prefixes {
		if r.port != 0 && r.port != port {
			continue
		}
		if !r.prefix.Contains(ip) {
			continue
		}
		if metadataAddrs[ip] && r.prefix.Bits() != ip.BitLen() {
			continue
		}
		return true
	}
	return false
}
