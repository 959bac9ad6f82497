package hosted

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/egressselector"
	"k8s.io/utils/ptr"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/netpol"
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

// What a tenant points its API server at (webhooks by URL or by Service, conversion,
// aggregated APIs) is dialled through konnectivity into the tenant, never from the
// host's network: kube-apiserver's own reader accepts the configuration, and the pods
// may open connections to their etcd and the host's DNS only.
func TestAPIServerReachesTheHostOnlyForEtcdAndDNS(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "egress-selector.yaml")
	g.Expect(os.WriteFile(path, []byte(egressSelectorConfiguration), 0o600)).To(Succeed())
	cfg, err := egressselector.ReadEgressSelectorConfiguration(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(egressselector.ValidateEgressSelectorConfiguration(cfg)).To(BeEmpty())
	g.Expect(cfg.EgressSelections).To(ConsistOf(
		HaveField("Name", "cluster"), HaveField("Name", "controlplane")))
	for _, sel := range cfg.EgressSelections {
		g.Expect(sel.Connection.ProxyProtocol).To(BeEquivalentTo("GRPC"), sel.Name)
		g.Expect(sel.Connection.Transport.UDS.UDSName).To(Equal(konnectivitySocket), sel.Name)
	}

	in := input()
	policies := in.Policies()
	g.Expect(policies).To(HaveLen(2))
	api := policies[1]
	g.Expect(api.Name).To(Equal(APIPolicyName(in.Cluster)))
	g.Expect(api.Spec.PodSelector.MatchLabels).To(Equal(selector(in.Cluster, ComponentAPIServer)))
	for _, p := range policies {
		g.Expect(p.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress), p.Name)
		for _, rule := range p.Spec.Egress {
			g.Expect(rule.To).NotTo(BeEmpty(), "%s: a rule without peers allows every address", p.Name)
			for _, peer := range rule.To {
				g.Expect(peer.IPBlock).To(BeNil(), p.Name)
			}
		}
	}
	g.Expect(api.Spec.Egress).To(ConsistOf(
		networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: selector(in.Cluster, ComponentEtcd)}}},
			Ports: []networkingv1.NetworkPolicyPort{netpol.Port(corev1.ProtocolTCP, EtcdPort)},
		},
		netpol.DNSEgress(),
	))
}

// The API server pod and the kubeadm Job run to the restricted Pod Security
// Standard, their keys in memory.
func TestPodsAreRestricted(t *testing.T) {
	g := NewWithT(t)
	in := input()
	for name, spec := range map[string]corev1.PodSpec{
		"API server": in.Deployment("hash").Spec.Template.Spec,
		"kubeadm":    in.Job("hash").Spec.Template.Spec,
	} {
		g.Expect(spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), name)
		g.Expect(spec.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(nonRootUser)), name)
		g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), name)
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			g.Expect(c.SecurityContext).NotTo(BeNil(), c.Name)
			g.Expect(c.SecurityContext.RunAsUser).To(BeNil(), "%s: the pod's user, not its own", c.Name)
			g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty(), c.Name)
			g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		}
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.Name != "konnectivity" { // a socket
				g.Expect(v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory), "%s: %s", name, v.Name)
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

// A node drain takes one API server and one etcd member at a time.
func TestDisruptionBudgets(t *testing.T) {
	g := NewWithT(t)
	in := input()
	budgets := in.DisruptionBudgets()
	g.Expect(budgets).To(HaveLen(2))
	for i, component := range []string{ComponentAPIServer, ComponentEtcd} {
		b := budgets[i]
		g.Expect(b.Spec.Selector.MatchLabels).To(Equal(selector(in.Cluster, component)))
		g.Expect(b.Spec.MaxUnavailable.IntValue()).To(Equal(1))
		g.Expect(b.Spec.MinAvailable).To(BeNil())
	}
	// They select what the workloads run.
	g.Expect(budgets[0].Spec.Selector.MatchLabels).To(Equal(in.Deployment("hash").Spec.Template.Labels))
	sts, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	for k, v := range budgets[1].Spec.Selector.MatchLabels {
		g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
	}
}
