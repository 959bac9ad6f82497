package hosted

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types"
)

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
	// Cluster API's kubeadm types read back what was written, the network included.
	docs := strings.Split(cfg, "---\n")
	g.Expect(docs).To(HaveLen(2))
	cc, data, err := kubeadmtypes.UnmarshalClusterConfiguration(docs[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.Etcd.Local.DataDir).To(Equal("/var/lib/etcd"))
	g.Expect(cc.APIServer.CertSANs).To(ContainElement("demo-apiserver.team-a.svc"))
	g.Expect(*data.ServiceSubnet).To(Equal("10.95.0.0/16"))
	g.Expect(*data.DNSDomain).To(Equal("tenant.local"))
	ic, err := kubeadmtypes.UnmarshalInitConfiguration(docs[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.NodeRegistration.Name).To(Equal("@POD_NAME@"))

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

// A Job's pod template cannot change: a new template is a new Job, as new inputs are.
func TestJobNameFollowsItsTemplate(t *testing.T) {
	g := NewWithT(t)
	in := input()
	job := in.Job("hash")
	g.Expect(in.Job("hash").Name).To(Equal(job.Name), "stable")
	g.Expect(in.Job("other").Name).NotTo(Equal(job.Name))
	in.HCP.Spec.Version = "v1.35.5" // the kubeadm image
	g.Expect(in.Job("hash").Name).NotTo(Equal(job.Name))
	g.Expect(job.Name).To(MatchRegexp(`^demo-kubeadm-[0-9a-f]{8}$`))
}
