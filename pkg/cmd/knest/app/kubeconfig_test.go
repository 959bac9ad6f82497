package app_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func tenantKubeconfig(g Gomega, server string) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["demo"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("tenant-ca")}
	cfg.AuthInfos["demo-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["demo-admin@demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "demo-admin"}
	cfg.CurrentContext = "demo-admin@demo"
	raw, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return raw
}

func TestKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false").err).To(Succeed())

	r := knest(t, "", "kubeconfig", "demo", "-n", ns)
	g.Expect(r.err).To(MatchError(ContainSubstring("cluster demo has no kubeconfig yet (phase unknown): it appears in status.kubeconfigSecretName once the control plane is initialized")))

	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) { nc.Status.KubeconfigSecretName = "demo-kubeconfig" })
	r = knest(t, "", "kubeconfig", "demo", "-n", ns)
	g.Expect(r.err).To(MatchError(ContainSubstring("failed to read the kubeconfig of cluster demo from Secret demo-kubeconfig")))

	data := tenantKubeconfig(g, "https://demo-lb."+ns+".svc:6443")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-kubeconfig", Namespace: ns},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{"value": data},
	}
	g.Expect(env.Client.Create(t.Context(), secret)).To(Succeed())

	r = knest(t, "", "kubeconfig", "demo", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(Equal(string(data)), "printed as stored, to stdout")
	g.Expect(r.stderr).To(BeEmpty())

	// --output-file: mode 0600, also over an existing file with looser permissions.
	path := filepath.Join(t.TempDir(), "demo.kubeconfig")
	g.Expect(os.WriteFile(path, []byte("old"), 0o644)).To(Succeed())
	r = knest(t, "", "kubeconfig", "demo", "-n", ns, "--output-file", path)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty())
	g.Expect(r.stderr).To(ContainSubstring("✓ kubeconfig of cluster demo written to " + path))
	written, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(Equal(data))
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	entries, err := os.ReadDir(filepath.Dir(path))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no temporary file left behind")

	// --server: a port-forward; TLS still verifies against the endpoint's name.
	r = knest(t, "", "kubeconfig", "demo", "-n", ns, "--server", "https://127.0.0.1:16443")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	cfg, err := clientcmd.Load([]byte(r.stdout))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Clusters["demo"].Server).To(Equal("https://127.0.0.1:16443"))
	g.Expect(cfg.Clusters["demo"].TLSServerName).To(Equal("demo-lb." + ns + ".svc"))
	g.Expect(cfg.Clusters["demo"].CertificateAuthorityData).To(Equal([]byte("tenant-ca")))
	g.Expect(cfg.CurrentContext).To(Equal("demo-admin@demo"))

	r = knest(t, "", "kubeconfig", "demo", "-n", ns, "--server", "127.0.0.1:16443")
	g.Expect(r.err).To(MatchError(ContainSubstring(`--server: server "127.0.0.1:16443" must be a URL like https://HOST:PORT`)))

	secret.Data = map[string][]byte{"other": data}
	g.Expect(env.Client.Update(t.Context(), secret)).To(Succeed())
	r = knest(t, "", "kubeconfig", "demo", "-n", ns)
	g.Expect(r.err).To(MatchError(ContainSubstring(`secret demo-kubeconfig of cluster demo has no "value" key with a kubeconfig`)))
}
