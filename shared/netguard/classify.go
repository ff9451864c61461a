package netguard

import (
	"net/netip"
	"strings"

	"code.dny.dev/ssrf"
)

// Reason says why a destination is blocked.
type Reason string

// Reasons, in the order they are tested: a metadata address is reported as such even though
// it is also link-local, private or shared address space.
const (
	ReasonScheme      Reason = "scheme"       // not http or https
	ReasonMetadata    Reason = "metadata"     // a cloud instance metadata service
	ReasonUnspecified Reason = "unspecified"  // 0.0.0.0/8, ::
	ReasonLoopback    Reason = "loopback"     // 127.0.0.0/8, ::1
	ReasonBroadcast   Reason = "broadcast"    // 255.255.255.255
	ReasonMulticast   Reason = "multicast"    // 224.0.0.0/4, ff00::/8
	ReasonLinkLocal   Reason = "link_local"   // 169.254.0.0/16, fe80::/10
	ReasonPrivate     Reason = "private"      // RFC 1918, fc00::/7
	ReasonSharedSpace Reason = "shared_space" // 100.64.0.0/10, carrier-grade NAT
	// ReasonReserved covers the rest of the IANA special-purpose registries: documentation,
	// benchmarking and reserved ranges, and every IPv6 address outside global unicast
	// 2000::/3 or inside its special-purpose blocks (6to4, NAT64, Teredo, ...), several of
	// which embed an IPv4 address that could reach the networks above.
	ReasonReserved Reason = "reserved"
)

// metadataAddrs are the instance metadata services of the major clouds. Most also fall in a
// blocked range; naming them gives a clearer reason, and blocks them even when an operator
// allowlists the range around them (the allowlist must name them to reach them).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata and credentials
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud (legacy)
}

// metadataNames are host names of metadata services, blocked by name so that no resolver
// configuration can make them reachable.
var metadataNames = map[string]bool{
	"metadata.google.internal": true,
	"metadata.goog":            true,
}

var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")

	// ianaGuard is the authority for "is this address publicly routable": its prefix lists
	// are generated from the IANA special-purpose registries. Ports and networks are this
	// package's business, so it checks neither.
	ianaGuard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())
)

// classify returns why ip must not be dialled, or "" when it is a public address. IPv4-mapped
// IPv6 addresses (::ffff:127.0.0.1) are judged as the IPv4 address they reach.
func classify(ip netip.Addr) Reason {
	ip = ip.Unmap().WithZone("")
	switch {
	case metadataAddrs[ip]:
		return ReasonMetadata
	case ip.IsUnspecified() || thisNetwork.Contains(ip):
		return ReasonUnspecified
	case ip.IsLoopback():
		return ReasonLoopback
	case ip == broadcast:
		return ReasonBroadcast
	case ip.IsMulticast():
		return ReasonMulticast
	case ip.IsLinkLocalUnicast():
		return ReasonLinkLocal
	case ip.IsPrivate():
		return ReasonPrivate
	case sharedSpace.Contains(ip):
		return ReasonSharedSpace
	case ianaGuard.SafeAddr(ip) != nil:
		return ReasonReserved
	}
	return ""
}

// normalizeHost lower-cases a host name and drops a trailing root dot, so "Metadata.Google.
// Internal." and "metadata.google.internal" are one name.
func normalizeHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
