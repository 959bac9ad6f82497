package hostedcontrolplane

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func clusterSecret(g Gomega, s *scope, purpose secret.Purpose) *corev1.Secret {
	out := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.cluster.Namespace, Name: secret.Name(s.cluster.Name, purpose)}
	g.Expect(env.Client.Get(context.Background(), key, out)).To(Succeed())
	return out
}

// The missing CAs and service-account key are made, controlled by the control
// plane, and kept from then on; a CA someone brought is used as it is.
func TestReconcileCertificates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "certs", "10.95.0.20")

	brought := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{}).GetByPurpose(secret.ClusterCA)
	g.Expect(brought.Generate()).To(Succeed())
	ca := brought.AsSecret(util.ObjectKey(s.cluster), metav1.OwnerReference{})
	ca.OwnerReferences = nil
	g.Expect(env.Client.Create(ctx, ca)).To(Succeed())

	made := map[secret.Purpose]string{}
	for range 2 {
		_, err := reconciler().reconcileCertificates(ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
		for _, p := range []secret.Purpose{secret.EtcdCA, secret.FrontProxyCA, secret.ServiceAccount} {
			got := clusterSecret(g, s, p)
			g.Expect(metav1.GetControllerOf(got)).To(HaveField("UID", s.hcp.UID), got.Name)
			if made[p] == "" {
				made[p] = got.ResourceVersion
			}
			g.Expect(got.ResourceVersion).To(Equal(made[p]), "%s written again", got.Name)
		}
		got := clusterSecret(g, s, secret.ClusterCA)
		g.Expect(got.ResourceVersion).To(Equal(ca.ResourceVersion), "the CA brought written")
		g.Expect(got.OwnerReferences).To(BeEmpty())
	}
}

// The kubeconfig names the endpoint (an IPv6 address in brackets), is written
// once, and is made anew when its client certificate nears its end.
func TestReconcileKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "kubeconfig", "fd00:95::1")
	_, err := reconciler().reconcileCertificates(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = reconciler().reconcileKubeconfig(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	kc := clusterSecret(g, s, secret.Kubeconfig)
	g.Expect(metav1.GetControllerOf(kc)).To(HaveField("UID", s.hcp.UID))
	cfg, err := clientcmd.Load(kc.Data[secret.KubeconfigDataName])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Clusters).To(HaveKeyWithValue(s.cluster.Name, HaveField("Server", "https://[fd00:95::1]:6443")))

	_, err = reconciler().reconcileKubeconfig(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterSecret(g, s, secret.Kubeconfig).ResourceVersion).To(Equal(kc.ResourceVersion), "a current kubeconfig written again")

	// A client certificate with 10 days left, inside the 30 days of renewal.
	ending := clientCertEnding(g, clusterSecret(g, s, secret.ClusterCA), time.Now().Add(10*24*time.Hour))
	for _, user := range cfg.AuthInfos {
		user.ClientCertificateData = ending
	}
	kc.Data[secret.KubeconfigDataName], err = clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Update(ctx, kc)).To(Succeed())
	_, err = reconciler().reconcileKubeconfig(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	renewed, err := clientcmd.Load(clusterSecret(g, s, secret.Kubeconfig).Data[secret.KubeconfigDataName])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed.Clusters).To(HaveKeyWithValue(s.cluster.Name, HaveField("Server", "https://[fd00:95::1]:6443")))
	for _, user := range renewed.AuthInfos {
		g.Expect(user.ClientCertificateData).NotTo(Equal(ending), "not renewed")
		crt, err := certs.DecodeCertPEM(user.ClientCertificateData)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(crt.NotAfter).To(BeTemporally(">", time.Now().Add(30*24*time.Hour)))
	}
}

// clientCertEnding is a client certificate signed by the CA in caSecret that ends
// at notAfter, PEM-encoded.
func clientCertEnding(g Gomega, caSecret *corev1.Secret, notAfter time.Time) []byte {
	caCert, err := certs.DecodeCertPEM(caSecret.Data[secret.TLSCrtDataName])
	g.Expect(err).NotTo(HaveOccurred())
	caKey, err := certs.DecodePrivateKeyPEM(caSecret.Data[secret.TLSKeyDataName])
	g.Expect(err).NotTo(HaveOccurred())
	key, err := certs.NewPrivateKey()
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	g.Expect(err).NotTo(HaveOccurred())
	crt, err := x509.ParseCertificate(der)
	g.Expect(err).NotTo(HaveOccurred())
	return certs.EncodeCertPEM(crt)
}
