package mtls

import (
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
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
	Created []string // files written this time, relative to Dir; empty when everything was already valid
}

// Layout says where EnsureDevCAAt writes, so that each process is given only its own
// files. CA holds the CA's certificate and private key, which only the `certs` command
// reads; Router holds the router's server certificate and key, Executor the executor's
// client certificate and key, and each of the two a copy of the CA certificate (to verify
// the other side). An empty Router or Executor means CA.
type Layout struct {
	CA, Router, Executor string
}

// EnsureDevCA makes dir hold a development CA and two certificates it signed, every file
// in the one directory: EnsureDevCAAt with Layout{CA: dir}.
func EnsureDevCA(dir string) (DevCA, error) { return EnsureDevCAAt(Layout{CA: dir}) }

// EnsureDevCAAt makes l.CA hold a development CA, l.Router the router's server certificate
// (SANs 127.0.0.1, ::1, localhost, provider-router) and l.Executor the executor's client
// certificate (CN executor, URI SAN ExecutorURI), both signed by the CA. It is idempotent:
// files that exist, parse, are signed by the CA and stay valid for another week are kept;
// a missing or invalid CA re-issues everything. Directories are created 0700 and every
// file is written 0600.
func EnsureDevCAAt(l Layout) (DevCA, error) {
	l.Router = cmp.Or(l.Router, l.CA)
	l.Executor = cmp.Or(l.Executor, l.CA)
	res := DevCA{Dir: l.CA}
	for _, d := range []string{l.CA, l.Router, l.Executor} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return res, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	created := func(dir, name string) {
		rel, err := filepath.Rel(l.CA, filepath.Join(dir, name))
		if err != nil {
			rel = filepath.Join(dir, name)
		}
		res.Created = append(res.Created, rel)
	}
	caFile, caKeyFile := filepath.Join(l.CA, CAFile), filepath.Join(l.CA, CAKeyFile)
	ca, caKey, err := loadPair(caFile, caKeyFile, nil)
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
		if err := writePair(caFile, caKeyFile, ca, caKey); err != nil {
			return res, err
		}
		created(l.CA, CAFile)
		created(l.CA, CAKeyFile)
		// A new CA invalidates every certificate the old one signed.
		_ = os.Remove(filepath.Join(l.Router, RouterFile))
		_ = os.Remove(filepath.Join(l.Executor, ExecutorFile))
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	leaves := []struct {
		dir, cert, key string
		tmpl           *x509.Certificate
	}{
		{l.Router, RouterFile, RouterKeyFile, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "provider-router", Organization: []string{"Switchyard"}},
			DNSNames:    []string{"localhost", "provider-router"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotAfter:    time.Now().AddDate(2, 0, 0),
		}},
		{l.Executor, ExecutorFile, ExecutorKeyFile, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "executor", Organization: []string{"Switchyard"}},
			URIs:        []*url.URL{mustURL(ExecutorURI)},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotAfter:    time.Now().AddDate(2, 0, 0),
		}},
	}
	for _, leaf := range leaves {
		if leaf.dir != l.CA {
			// The holder's copy of the CA certificate, to verify the other side.
			copyFile := filepath.Join(leaf.dir, CAFile)
			if have, err := os.ReadFile(copyFile); err != nil || !bytes.Equal(have, caPEM) {
				if err := writeFile(copyFile, caPEM); err != nil {
					return res, err
				}
				created(leaf.dir, CAFile)
			}
		}
		certFile, keyFile := filepath.Join(leaf.dir, leaf.cert), filepath.Join(leaf.dir, leaf.key)
		if _, _, err := loadPair(certFile, keyFile, ca); err == nil {
			continue
		}
		cert, key, err := newCert(ca, caKey, leaf.tmpl)
		if err != nil {
			return res, fmt.Errorf("issuing %s: %w", leaf.cert, err)
		}
		if err := writePair(certFile, keyFile, cert, key); err != nil {
			return res, err
		}
		created(leaf.dir, leaf.cert)
		created(leaf.dir, leaf.key)
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
	if err := writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
		return err
	}
	return writeFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

// writeFile writes data to a new file of mode 0600: an existing file is removed first, so
// that a looser mode it had never applies to the new content.
func writeFile(name string, data []byte) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", name, err)
	}
	if err := os.WriteFile(name, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
