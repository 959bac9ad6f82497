package cluster

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/netpol"
)

// PrivateNetworks are the ranges a tenant's VMs may not reach outside their own
// cluster: RFC 1918, carrier-grade NAT (RFC 6598) and link-local, which covers the
// host's pod and Service networks on any common CNI and cloud metadata endpoints.
var PrivateNetworks = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"}

// APIServerPort is where a tenant control-plane VM serves the Kubernetes API
// (kubeadm's default, which CAPK's Service targets).
const APIServerPort = 6443

// CAPKProviderNames are the values of the provider label (cluster.x-k8s.io/provider)
// on CAPK's controller pods: CAPK's own kustomization sets kubevirt on the pod
// template; clusterctl's name for the provider is infrastructure-kubevirt.
var CAPKProviderNames = []string{"kubevirt", "infrastructure-kubevirt"}

// IsolationName is the NetworkPolicy that fences a cluster's VMs.
func IsolationName(cluster string) string { return cluster + "-isolation" }

// isolation fences the cluster's VMs (their virt-launcher pods) both ways, as
// HyperShift's KubeVirt platform does for its guests' egress.
//
// Out, the VMs may open connections to: pods of their own cluster (next paragraph;
// this includes the API endpoint once a Service or load balancer has translated
// the address), their resolver's pods (netpol.GuestDNS, else the host's DNS pods,
// netpol.HostDNS), and addresses outside
// PrivateNetworks. Another tenant's VMs and endpoint, the host's nodes and its API
// server are all private addresses.
//
// In, the policy admits:
//   - on any port, pods of the cluster's namespace labelled with its name
//     (cluster.x-k8s.io/cluster-name): its VMs, a hosted control plane's pods, and
//     its etcd backup and restore Jobs, which carry that label too;
//   - on the API server's port, anyone (the endpoint is meant to be reached, through
//     a Service, a NodePort or a load balancer);
//   - on SSH, CAPK's controller pods in any namespace (its bootstrap check);
//   - on etcd's client port, the cluster's backup Jobs (already admitted by the
//     first rule; this one names what they need).
//
// So kubelet, etcd and the tenant CNI's VXLAN port answer only pods of the cluster
// itself; no other pod of the host, in any namespace, reaches them. A tenant's
// LoadBalancer Services add a policy each that opens their node ports on the
// worker VMs (pkg/cloudprovider). Traffic from the host's nodes themselves is not
// subject to NetworkPolicy on most CNIs. NetworkPolicies add up: a platform team
// widens this with a policy of its own.
func (r renderer) isolation() *networkingv1.NetworkPolicy {
	ownVMs := metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterNameLabel: r.name}}
	tcp := corev1.ProtocolTCP
	api, ssh, etcd := intstr.FromInt32(APIServerPort), intstr.FromInt32(22), intstr.FromInt32(backup.EtcdPort)
	return &networkingv1.NetworkPolicy{
		TypeMeta:   typeMeta(networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")),
		ObjectMeta: r.meta(IsolationName(r.name), ""),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				kubevirtv1.AppLabel:        "virt-launcher", // on every VM's pod
				clusterv1.ClusterNameLabel: r.name,
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &ownVMs}}},
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &api}}},
				{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{},
						PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
							Key: clusterv1.ProviderNameLabel, Operator: metav1.LabelSelectorOpIn, Values: CAPKProviderNames,
						}}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &ssh}},
				},
				{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: backup.Selector(r.name, backup.ComponentBackup)}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &etcd}},
				},
			},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &ownVMs}}},
				r.dnsEgress(),
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: PrivateNetworks}}}},
			},
		},
	}
}

// dnsEgress lets the VMs reach their resolver: the guest DNS when the controller
// has one, else the host's DNS pods.
func (r renderer) dnsEgress() networkingv1.NetworkPolicyEgressRule {
	if r.opts.GuestDNS != nil {
		return r.opts.GuestDNS.Egress()
	}
	return netpol.DNSEgress()
}

// nameserver is the VMs' DNS server: the guest DNS's address, or "" for their
// pods' (the host's cluster DNS).
func (r renderer) nameserver() string {
	if r.opts.GuestDNS != nil {
		return r.opts.GuestDNS.Nameserver
	}
	return ""
}
