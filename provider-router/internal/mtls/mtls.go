// Package mtls is the router's first lock, mutual TLS: the server's TLS configuration,
// the check that a caller's client certificate was signed by the trusted CA and names an
// allowlisted identity, and a development CA that issues the certificates for `make run`
// and the tests.
package mtls

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// ServerConfig is the router's TLS configuration. The handshake requests a client
// certificate but does not verify it: Verifier does, per request, so that a caller without
// an acceptable certificate gets the router's 403 naming the mTLS lock rather than an
// opaque handshake failure.
func ServerConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the router certificate %s: %w", certFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
	}, nil
}

// LoadPool reads a PEM file of CA certificates.
func LoadPool(caFile string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA file %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// Errors of Verifier.Identify.
var (
	ErrNoCertificate = errors.New("mtls: no client certificate")
	ErrUntrusted     = errors.New("mtls: client certificate not signed by the trusted CA")
	ErrNotAllowed    = errors.New("mtls: client identity not on the allowlist")
)

// Verifier checks client certificates against a CA pool and an allowlist of identities.
// An identity is a certificate's subject CN or any of its URI SANs (e.g. a SPIFFE id).
// Results are cached per certificate for a minute, so a keep-alive connection pays for
// the signature check once, not per request. It is safe for concurrent use.
type Verifier struct {
	roots *x509.CertPool
	names []string

	mu    sync.Mutex
	cache map[[32]byte]verdict
}

type verdict struct {
	identity string
	err      error
	until    time.Time
}

// NewVerifier returns a Verifier trusting roots and admitting names.
func NewVerifier(roots *x509.CertPool, names []string) *Verifier {
	return &Verifier{roots: roots, names: names, cache: map[[32]byte]verdict{}}
}

// Identify returns the allowlisted identity of the connection's client certificate, or an
// error matching ErrNoCertificate, ErrUntrusted or ErrNotAllowed.
func (v *Verifier) Identify(state *tls.ConnectionState) (string, error) {
	if state == nil || len(state.PeerCertificates) == 0 {
		return "", ErrNoCertificate
	}
	leaf := state.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	now := time.Now()
	v.mu.Lock()
	if d, ok := v.cache[sum]; ok && now.Before(d.until) {
		v.mu.Unlock()
		return d.identity, d.err
	}
	v.mu.Unlock()

	d := verdict{until: now.Add(time.Minute)}
	inter := x509.NewCertPool()
	for _, c := range state.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		d.err = fmt.Errorf("%w: %v", ErrUntrusted, err)
	} else {
		d.identity, d.err = v.allowed(leaf)
		if leaf.NotAfter.Before(d.until) {
			d.until = leaf.NotAfter
		}
	}
	v.mu.Lock()
	if len(v.cache) > 4096 { // a bound, not an LRU: the allowlist has a handful of callers
		clear(v.cache)
	}
	v.cache[sum] = d
	v.mu.Unlock()
	return d.identity, d.err
}

func (v *Verifier) allowed(leaf *x509.Certificate) (string, error) {
	if cn := leaf.Subject.CommonName; cn != "" && slices.Contains(v.names, cn) {
		return cn, nil
	}
	for _, u := range leaf.URIs {
		if slices.Contains(v.names, u.String()) {
			return u.String(), nil
		}
	}
	return "", ErrNotAllowed
}
