package hosted

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
)

func input() Input {
	return Input{
		HCP: &hcpv1.HostedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Name: "demo-cp", Namespace: "team-a"},
			Spec: hcpv1.HostedControlPlaneSpec{Version: "v1.35.4", Replicas: ptr.To[int32](1),
				Network: hcpv1.NetworkSpec{PodCIDR: "10.243.0.0/16", ServiceCIDR: "10.95.0.0/16", DNSDomain: "tenant.local"}},
		},
		Cluster: "demo", ServiceIP: "10.96.7.8",
	}
}

// kubeadm uploads its configuration to the tenant, where `kubeadm join` on the
// workers reads it: the kubelet's client CA is certificatesDir/ca.crt, so the
// certificates must be where a node keeps them, not where the pods happen to.
func TestKubeadmConfigUsesTheNodesCertificateDirectory(t *testing.T) {
	g := NewWithT(t)
	cm, err := input().KubeadmConfig()
	g.Expect(err).NotTo(HaveOccurred())
	cfg := cm.Data["kubeadm.yaml"]
	g.Expect(cfg).To(ContainSubstring("certificatesDir: /etc/kubernetes/pki\n"))
	g.Expect(cfg).To(ContainSubstring("controlPlaneEndpoint: 10.96.7.8:6443"))
	g.Expect(cfg).To(ContainSubstring("advertiseAddress: 10.96.7.8"))

	d := input().Deployment("hash")
	for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == "pki" {
				g.Expect(m.MountPath).To(Equal("/etc/kubernetes/pki"), c.Name)
			}
		}
		for _, a := range c.Command {
			if strings.HasPrefix(a, "--") && (strings.HasSuffix(a, ".crt") || strings.HasSuffix(a, ".key") || strings.HasSuffix(a, ".pub")) {
				g.Expect(a).To(ContainSubstring("=/etc/kubernetes/pki/"), "%s: %s", c.Name, a)
			}
		}
	}
}
