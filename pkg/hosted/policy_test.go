package hosted

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/egressselector"

	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/netpol"
)

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

func TestEtcdPolicyAdmitsTheClustersBackupAndReplaceJobsOnly(t *testing.T) {
	g := NewWithT(t)
	in := input()
	policy := in.Policies()[0]
	g.Expect(policy.Name).To(Equal(EtcdPolicyName(in.Cluster)))
	from := policy.Spec.Ingress[0].From
	g.Expect(from).To(ContainElement(HaveField("PodSelector.MatchLabels", backup.Selector(in.Cluster, backup.ComponentBackup))))
	g.Expect(from).To(ContainElement(HaveField("PodSelector.MatchLabels", in.EtcdReplaceJob(0, "uid", "knest:test").Spec.Template.Labels)))
	for _, peer := range from {
		g.Expect(peer.NamespaceSelector).To(BeNil(), "the cluster's own namespace only")
		g.Expect(peer.PodSelector.MatchLabels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", in.Cluster))
	}
}
