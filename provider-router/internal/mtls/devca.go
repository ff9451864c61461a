package mtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The files EnsureDevCA writes into its directory.
const (
	CAFile          = "ca.pem"
	CAKeyFile       = "ca-key.pem"
	RouterFile      = "router.pem"
	RouterKeyFile   = "router-key.pem"
	ExecutorFile    = "executor.pem"
	ExecutorKeyFile = "executor-key.pem"
)

// ExecutorURI is the SPIFFE-style URI SAN of the development executor certificate; its CN
// is "executor". Either may be put on SWITCHYARD_ROUTER_CLIENT_NAMES.
const ExecutorURI = "spiffe://switchyard.local/executor"

// DevCA reports what EnsureDevCA did.
type DevCA struct {
	Dir     string
	Created []string // files written this time; empty when everything was already valid
}

// EnsureDevCA makes dir hold a development CA and two certificates it signed: the
// router's server certificate (SANs 127.0.0.1, ::1, localhost, provider-router) and the
// executor's client certificate (CN executor, URI SAN ExecutorURI). It is idempotent:
// files that exist, parse, are signed by the CA and stay valid for another week are kept;
// a missing or invalid CA re-issues everything. Private keys are written 0600.
func EnsureDevCA(dir string) (DevCA, error) {
	res := DevCA{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, fmt.Errorf("creating %s: %w", dir, err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	ca, caKey, err := loadPair(path(CAFile), path(CAKeyFile), nil)
	if err != nil {
		ca, caKey, err = newCert(nil, nil, &x509.Certificate{
			Subject:               pkix.Name{CommonName: "Switchyard development CA", Organization: []string{"Switchyard"}},
			IsCA:                  true,
			BasicConstraintsValid: true,
			MaxPathLenZero:        true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
			NotAfter:              time.Now().AddDate(10, 0, 0),
		})
		if err != nil {
			return res, fmt.Errorf("creating the development CA: %w", err)
		}
		if err := writePair(path(CAFile), path(CAKeyFile), ca, caKey); err != nil {
			return res, err
		}
		res.Created = append(res.Created, CAFile, CAKeyFile)
		// A new CA invalidates every certificate the old one signed.
		_ = os.Remove(path(RouterFile))
		_ = os.Remove(path(ExecutorFile))
	}
	leaves := []struct {
		cert, key string
		tmpl      *x509.Certificate
	}{
		{RouterFile, RouterKeyFile, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "provider-router", Organization: []string{"Switchyard"}},
			DNSNames:    []string{"localhost", "provider-router"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotAfter:    time.Now().AddDate(2, 0, 0),
		}},
		{ExecutorFile, ExecutorKeyFile, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "executor", Organization: []string{"Switchyard"}},
			URIs:        []*url.URL{mustURL(ExecutorURI)},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotAfter:    time.Now().AddDate(2, 0, 0),
		}},
	}
	for _, l := range leaves {
		if _, _, err := loadPair(path(l.cert), path(l.key), ca); err == nil {
			continue
		}
		cert, key, err := newCert(ca, caKey, l.tmpl)
		if err != nil {
			return res, fmt.Errorf("issuing %s: %w", l.cert, err)
		}
		if err := writePair(path(l.cert), path(l.key), cert, key); err != nil {
			return res, err
		}
		res.Created = append(res.Created, l.cert, l.key)
	}
	return res, nil
}

// IssueClient signs a client certificate with the CA in dir, for tests that need an
// identity other than the executor's. It returns PEM certificate and key.
func IssueClient(dir, commonName string, uris ...string) (certPEM, keyPEM []byte, err error) {
	ca, caKey, err := loadPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile), nil)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    time.Now().AddDate(0, 0, 7),
	}
	for _, u := range uris {
		tmpl.URIs = append(tmpl.URIs, mustURL(u))
	}
	cert, key, err := newCert(ca, caKey, tmpl)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// newCert signs tmpl with parent (self-signed when parent is nil) under a fresh P-256 key.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour) // tolerate small clock skew between hosts
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// loadPair reads a certificate and its key, and checks that they match, that the
// certificate stays valid for another week and, when ca is given, that ca signed it.
func loadPair(certFile, keyFile string, ca *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, nil, err
		}
	}
	if time.Now().AddDate(0, 0, 7).After(cert.NotAfter) {
		return nil, nil, errors.New("expires within a week")
	}
	if ca != nil {
		if err := cert.CheckSignatureFrom(ca); err != nil {
			return nil, nil, err
		}
	}
	return cert, key, nil
}

func writePair(certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyFile, err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", certFile, err)
	}
	return nil
}
