package backup

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ClientTLS is the TLS configuration of a backup client: its certificate, and a
// check of etcd's serving certificate against the cluster's etcd CA for
// ServerName. etcd's client sets the name it verifies from each endpoint's host,
// and a VM control plane's Service name is not in kubeadm's certificates (its
// hostname, localhost and its addresses are), so the chain and the name are
// verified here instead of by crypto/tls.
func ClientTLS(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the etcd CA file holds no certificate")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		// Verified in VerifyConnection, for ServerName, whatever the endpoint.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, DNSName: ServerName, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("etcd's serving certificate: %w", err)
			}
			return nil
		},
	}, nil
}
