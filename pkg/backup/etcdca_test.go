package backup

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/certs"
)

func TestEtcdCASignsWhatCurrentAccepts(t *testing.T) {
	g := NewWithT(t)
	caCert, caKey := newCA(t)
	ca := EtcdCA{Cert: caCert, Key: caKey}
	cfg := certs.Config{CommonName: "demo-etcd", AltNames: certs.AltNames{DNSNames: []string{"demo-etcd.t.svc", "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	certPEM, keyPEM, err := ca.Sign(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(keyPEM)).NotTo(Equal(string(caKey)), "a key of its own")
	c, err := certs.DecodeCertPEM(certPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Subject.CommonName).To(Equal("demo-etcd"))
	g.Expect(c.ExtKeyUsage).To(Equal(cfg.Usages))
	g.Expect(c.VerifyHostname("127.0.0.1")).To(Succeed())

	now := time.Now()
	// Checking needs no key.
	checker := EtcdCA{Cert: caCert}
	g.Expect(checker.Current(certPEM, cfg, now)).To(BeTrue())
	// Made anew: near its end, for other names, by another CA, or unreadable.
	g.Expect(checker.Current(certPEM, cfg, c.NotAfter.Add(-etcdCertRenewBefore))).To(BeFalse())
	g.Expect(checker.Current(certPEM, cfg, c.NotAfter.Add(-etcdCertRenewBefore-time.Minute))).To(BeTrue())
	other := cfg
	other.AltNames.DNSNames = []string{"demo-etcd.u.svc", "localhost"}
	g.Expect(checker.Current(certPEM, other, now)).To(BeFalse())
	other = cfg
	other.AltNames.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	g.Expect(checker.Current(certPEM, other, now)).To(BeFalse())
	otherCert, _ := newCA(t)
	g.Expect(EtcdCA{Cert: otherCert}.Current(certPEM, cfg, now)).To(BeFalse())
	g.Expect(checker.Current([]byte("garbage"), cfg, now)).To(BeFalse())
	g.Expect(EtcdCA{Cert: []byte("garbage")}.Current(certPEM, cfg, now)).To(BeFalse())
}

func TestEtcdCASignRefusesAnUnreadableCA(t *testing.T) {
	g := NewWithT(t)
	caCert, caKey := newCA(t)
	_, _, err := EtcdCA{Cert: []byte("garbage"), Key: caKey}.Sign(certs.Config{CommonName: "x"})
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the etcd CA certificate")))
	_, _, err = EtcdCA{Cert: caCert}.Sign(certs.Config{CommonName: "x"})
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the etcd CA key")))
}

func TestClientCertificate(t *testing.T) {
	g := NewWithT(t)
	caCert, caKey := newCA(t)
	data, err := ClientCertificate(caCert, caKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(HaveLen(3))
	g.Expect(data[CACertKey]).To(Equal(caCert))
	c, err := certs.DecodeCertPEM(data[ClientCertKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}))
	g.Expect(c.DNSNames).To(BeEmpty())
	now := time.Now()
	g.Expect(ClientCertificateCurrent(data, caCert, now)).To(BeTrue())
	g.Expect(ClientCertificateCurrent(data, caCert, now.Add(300*24*time.Hour))).To(BeFalse())
	otherCert, _ := newCA(t)
	g.Expect(ClientCertificateCurrent(data, otherCert, now)).To(BeFalse())
}
