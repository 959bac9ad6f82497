package backup

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
)

// newCA is a CA certificate and key, as Cluster API's etcd CA Secret holds them.
func newCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	ca := &secret.Certificate{Purpose: secret.EtcdCA}
	if err := ca.Generate(); err != nil {
		t.Fatal(err)
	}
	return ca.KeyPair.Cert, ca.KeyPair.Key
}

// serve answers one TLS handshake on loopback with a serving certificate for
// names, signed by the CA, and returns its address.
func serve(t *testing.T, caCert, caKey []byte, names ...string) string {
	t.Helper()
	ca, _ := certs.DecodeCertPEM(caCert)
	caPriv, _ := certs.DecodePrivateKeyPEM(caKey)
	key, _ := certs.NewPrivateKey()
	cfg := certs.Config{CommonName: "etcd", AltNames: certs.AltNames{DNSNames: names, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	cert, err := cfg.NewSignedCert(key, ca, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certs.EncodeCertPEM(cert), certs.EncodePrivateKeyPEM(key))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return l.Addr().String()
}

func TestClientTLSChecksTheChainAndLocalhostWhateverTheEndpointsName(t *testing.T) {
	g := NewWithT(t)
	caCert, caKey := newCA(t)
	client, err := ClientCertificate(caCert, caKey)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := ClientTLS(client[CACertKey], client[ClientCertKey], client[ClientKeyKey])
	g.Expect(err).NotTo(HaveOccurred())
	dial := func(addr string) error {
		c := cfg.Clone()
		// What etcd's client does: the endpoint's host, a Service name here.
		c.ServerName = "demo-etcd.tenants.svc"
		conn, err := tls.Dial("tcp", addr, c)
		if err == nil {
			conn.Close()
		}
		return err
	}
	// kubeadm's etcd serving certificate: the VM's hostname and localhost.
	g.Expect(dial(serve(t, caCert, caKey, "demo-cp-x7k2p", "localhost"))).To(Succeed())
	g.Expect(dial(serve(t, caCert, caKey, "demo-cp-x7k2p"))).To(MatchError(ContainSubstring("localhost")))
	otherCert, otherKey := newCA(t)
	g.Expect(dial(serve(t, otherCert, otherKey, "localhost"))).To(MatchError(ContainSubstring("unknown authority")))
}
