package knest

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func kubeconfig(g Gomega, clusters map[string]*clientcmdapi.Cluster) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters = clusters
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["admin@demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "admin"}
	cfg.CurrentContext = "admin@demo"
	raw, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return raw
}

func TestRewriteServer(t *testing.T) {
	tests := []struct {
		name          string
		server        string
		orig          clientcmdapi.Cluster
		wantTLSServer string
		errMatch      string
	}{
		{name: "DNS endpoint", server: "https://127.0.0.1:16443", orig: clientcmdapi.Cluster{Server: "https://demo-lb.team-a.svc:6443"}, wantTLSServer: "demo-lb.team-a.svc"},
		{name: "IP endpoint", server: "https://localhost:6443", orig: clientcmdapi.Cluster{Server: "https://10.96.12.7:6443"}, wantTLSServer: "10.96.12.7"},
		{name: "same host other port", server: "https://10.96.12.7:30443", orig: clientcmdapi.Cluster{Server: "https://10.96.12.7:6443"}, wantTLSServer: ""},
		{name: "existing tls-server-name kept", server: "https://127.0.0.1:6443", orig: clientcmdapi.Cluster{Server: "https://10.96.12.7:6443", TLSServerName: "api.example.com"}, wantTLSServer: "api.example.com"},
		{name: "not a URL", server: "127.0.0.1:6443", orig: clientcmdapi.Cluster{Server: "https://a:6443"}, errMatch: `server "127.0.0.1:6443" must be a URL like https://HOST:PORT`},
		{name: "no host", server: "https://", orig: clientcmdapi.Cluster{Server: "https://a:6443"}, errMatch: "must be a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			orig := tt.orig
			orig.CertificateAuthorityData = []byte("ca")
			raw := kubeconfig(g, map[string]*clientcmdapi.Cluster{"demo": &orig})
			out, err := RewriteServer(raw, tt.server)
			if tt.errMatch != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.errMatch)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			cfg, err := clientcmd.Load(out)
			g.Expect(err).NotTo(HaveOccurred())
			c := cfg.Clusters["demo"]
			g.Expect(c.Server).To(Equal(tt.server))
			g.Expect(c.TLSServerName).To(Equal(tt.wantTLSServer))
			g.Expect(c.CertificateAuthorityData).To(Equal([]byte("ca")), "the CA stays, so TLS still verifies")
			g.Expect(cfg.AuthInfos["admin"].Token).To(Equal("t"))
			g.Expect(cfg.CurrentContext).To(Equal("admin@demo"))
		})
	}
}

func TestRewriteServerRejectsGarbage(t *testing.T) {
	g := NewWithT(t)
	_, err := RewriteServer([]byte("not: [a kubeconfig"), "https://a:1")
	g.Expect(err).To(MatchError(ContainSubstring("failed to parse the kubeconfig")))
	_, err = RewriteServer([]byte("apiVersion: v1\nkind: Config\n"), "https://a:1")
	g.Expect(err).To(MatchError(ContainSubstring("has no clusters")))
}
