package routerclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig is the executor's side of the router's mutual TLS: it trusts the CA in caFile
// for the router's server certificate and presents the client certificate in certFile
// (key in keyFile), whose identity the router checks against its allowlist.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_ROUTER_CA_FILE: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("SWITCHYARD_ROUTER_CA_FILE: %s holds no PEM certificate", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("SWITCHYARD_ROUTER_CERT_FILE/SWITCHYARD_ROUTER_KEY_FILE: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{cert}}, nil
}
