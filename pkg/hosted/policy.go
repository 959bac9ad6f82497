package hosted

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/netpol"
)

// Policies fence the control-plane pods both ways. In: only the cluster's own API
// server pods (and backup and member-replace Jobs) reach its etcd, only its own members its peer port;
// the API server's and the konnectivity server's ports are open (the endpoint is
// meant to be reached, as a VM control plane's is: the tenant's VMs, Cluster API's and
// knest's controllers, users through a NodePort or load balancer), and nothing else of
// its pods is. Out: the API server pods reach their etcd and the host's DNS, nothing
// else of the host; whatever the tenant points them at (webhooks, aggregated APIs,
// conversion) goes through konnectivity's socket into the tenant (the egress
// selector). etcd's members reach each other and DNS. The VMs' own policy
// (pkg/cluster) lets them reach pods of their cluster.
func (in Input) Policies() []*networkingv1.NetworkPolicy {
	c := in.Cluster
	pods := func(component string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: selector(c, component)}}}
	}
	tcp := func(p int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{netpol.Port(corev1.ProtocolTCP, p)}
	}
	policy := func(name, component string, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: in.meta(name, ""),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector(c, component)},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress:     ingress,
				Egress:      egress,
			},
		}
	}
	return []*networkingv1.NetworkPolicy{
		policy(EtcdPolicyName(c), ComponentEtcd, []networkingv1.NetworkPolicyIngressRule{{
			From: append(pods(ComponentAPIServer), append(pods(ComponentEtcdReplace),
				networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: backup.Selector(c, backup.ComponentBackup)}})...),
			Ports: tcp(EtcdPort),
		}, {
			// Members of a three-member etcd replicate to each other.
			From: pods(ComponentEtcd), Ports: tcp(EtcdPeerPort),
		}}, []networkingv1.NetworkPolicyEgressRule{
			{To: pods(ComponentEtcd), Ports: tcp(EtcdPeerPort)},
			netpol.DNSEgress(),
		}),
		policy(APIPolicyName(c), ComponentAPIServer, []networkingv1.NetworkPolicyIngressRule{{
			Ports: append(tcp(APIServerPort), tcp(KonnectivityPort)...),
		}}, []networkingv1.NetworkPolicyEgressRule{
			{To: pods(ComponentEtcd), Ports: tcp(EtcdPort)},
			netpol.DNSEgress(),
		}),
	}
}

// DisruptionBudgets let a host's node drain evict one API server pod and one etcd
// member at a time: three API servers keep two serving, three members keep their
// quorum; a single one may go (its Deployment surges, its data is on its claim).
func (in Input) DisruptionBudgets() []*policyv1.PodDisruptionBudget {
	budget := func(name, component string) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: in.meta(name, component),
			Spec: policyv1.PodDisruptionBudgetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: selector(in.Cluster, component)},
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			},
		}
	}
	return []*policyv1.PodDisruptionBudget{
		budget(DeploymentName(in.Cluster), ComponentAPIServer),
		budget(EtcdName(in.Cluster), ComponentEtcd),
	}
}
