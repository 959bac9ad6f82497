package backup

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	"sigs.k8s.io/cluster-api/util/certs"
)

// etcdCertRenewBefore: a certificate the etcd CA signed (for a year, Cluster API's
// default) is made anew when less than this is left, as kubeadm's `certs renew`
// advice goes.
const etcdCertRenewBefore = 90 * 24 * time.Hour

// EtcdCA is a cluster's etcd CA, PEM, as Cluster API's `<cluster>-etcd` Secret
// holds it. It signs a hosted etcd's member certificates (pkg/hosted) and the
// backup client's: one way to make them and one to check them.
type EtcdCA struct {
	Cert []byte
	// Key is needed only to Sign.
	Key []byte
}

// Sign makes a new key and a certificate for cfg signed by the CA, both PEM.
func (ca EtcdCA) Sign(cfg certs.Config) (certPEM, keyPEM []byte, err error) {
	caCert, err := ca.cert()
	if err != nil {
		return nil, nil, err
	}
	caKey, err := certs.DecodePrivateKeyPEM(ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read the etcd CA key: %w", err)
	}
	key, err := certs.NewPrivateKey()
	if err != nil {
		return nil, nil, err
	}
	cert, err := cfg.NewSignedCert(key, caCert, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to sign etcd certificate %s: %w", cfg.CommonName, err)
	}
	return certs.EncodeCertPEM(cert), certs.EncodePrivateKeyPEM(key), nil
}

// Current tells whether certPEM is a certificate the CA signed for cfg's names
// with more than etcdCertRenewBefore left at now; if not, it is to be made anew.
func (ca EtcdCA) Current(certPEM []byte, cfg certs.Config, now time.Time) bool {
	caCert, err := ca.cert()
	if err != nil {
		return false
	}
	c, err := certs.DecodeCertPEM(certPEM)
	return err == nil && c != nil && c.CheckSignatureFrom(caCert) == nil && now.Add(etcdCertRenewBefore).Before(c.NotAfter) &&
		slices.Equal(c.DNSNames, cfg.AltNames.DNSNames) && slices.EqualFunc(c.IPAddresses, cfg.AltNames.IPs, net.IP.Equal)
}

func (ca EtcdCA) cert() (*x509.Certificate, error) {
	c, err := certs.DecodeCertPEM(ca.Cert)
	if err != nil || c == nil {
		return nil, fmt.Errorf("failed to read the etcd CA certificate: %v", err)
	}
	return c, nil
}
