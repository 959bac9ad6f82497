package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"

	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/netpol"
)

// The labels KubeVirt puts on a virt-launcher pod of a VM that CAPK created for
// cluster "demo" (CAPK's template labels are copied from VM to VMI to pod).
func launcherLabels(clusterName string) labels.Set {
	return labels.Set{
		"kubevirt.io":                   "virt-launcher",
		"kubevirt.io/vm":                clusterName + "-md-abcde-fghij",
		"cluster.x-k8s.io/cluster-name": clusterName,
		"cluster.x-k8s.io/role":         "worker",
	}
}

func selects(g *WithT, sel *metav1.LabelSelector, l labels.Set) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	g.Expect(err).NotTo(HaveOccurred())
	return s.Matches(l)
}

func TestIsolationFencesOnlyTheClustersVMs(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	p := graph.Isolation
	g.Expect(p.Name).To(Equal("demo-isolation"))
	g.Expect(p.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}))

	// Into the VMs: own VMs on any port, anyone on the API port, CAPK on SSH, the
	// cluster's backup Jobs on etcd's.
	g.Expect(p.Spec.Ingress).To(HaveLen(4))
	fromOwn, api, ssh, etcd := p.Spec.Ingress[0], p.Spec.Ingress[1], p.Spec.Ingress[2], p.Spec.Ingress[3]
	g.Expect(fromOwn.Ports).To(BeEmpty())
	g.Expect(fromOwn.From).To(HaveLen(1))
	g.Expect(fromOwn.From[0].NamespaceSelector).To(BeNil())
	g.Expect(selects(g, fromOwn.From[0].PodSelector, launcherLabels("demo"))).To(BeTrue())
	g.Expect(selects(g, fromOwn.From[0].PodSelector, launcherLabels("other"))).To(BeFalse(), "another tenant reaches no kubelet, etcd or VXLAN port")
	g.Expect(api.From).To(BeEmpty(), "the endpoint is reached from wherever its Service is")
	g.Expect(api.Ports).To(HaveLen(1))
	g.Expect(api.Ports[0].Port.IntValue()).To(Equal(6443))
	g.Expect(ssh.Ports[0].Port.IntValue()).To(Equal(22))
	g.Expect(selects(g, ssh.From[0].NamespaceSelector, labels.Set{"kubernetes.io/metadata.name": "capk-system"})).To(BeTrue())
	capkPod := labels.Set{"cluster.x-k8s.io/provider": "kubevirt", "control-plane": "controller-manager"}
	g.Expect(selects(g, ssh.From[0].PodSelector, capkPod)).To(BeTrue(), "CAPK's pod template carries its kustomization's provider label")
	g.Expect(selects(g, ssh.From[0].PodSelector, labels.Set{"cluster.x-k8s.io/provider": "infrastructure-kubevirt"})).To(BeTrue())
	g.Expect(selects(g, ssh.From[0].PodSelector, labels.Set{"cluster.x-k8s.io/provider": "cluster-api"})).To(BeFalse())
	g.Expect(selects(g, ssh.From[0].PodSelector, launcherLabels("other"))).To(BeFalse())
	g.Expect(etcd.Ports).To(HaveLen(1))
	g.Expect(etcd.Ports[0].Port.IntValue()).To(Equal(2379))
	g.Expect(etcd.From[0].NamespaceSelector).To(BeNil(), "the cluster's own namespace only")
	g.Expect(selects(g, etcd.From[0].PodSelector, labels.Set{"cluster.x-k8s.io/cluster-name": "demo", "knest.dev/component": "etcd-backup"})).To(BeTrue())
	g.Expect(selects(g, etcd.From[0].PodSelector, labels.Set{"cluster.x-k8s.io/cluster-name": "other", "knest.dev/component": "etcd-backup"})).To(BeFalse(),
		"another tenant's backup Job reads no etcd but its own")

	g.Expect(selects(g, &p.Spec.PodSelector, launcherLabels("demo"))).To(BeTrue())
	g.Expect(selects(g, &p.Spec.PodSelector, launcherLabels("other"))).To(BeFalse())
	g.Expect(selects(g, &p.Spec.PodSelector, labels.Set{"cluster.x-k8s.io/cluster-name": "demo"})).To(BeFalse(), "only VM pods")

	g.Expect(p.Spec.Egress).To(HaveLen(3))
	own, dns, outside := p.Spec.Egress[0], p.Spec.Egress[1], p.Spec.Egress[2]
	g.Expect(own.Ports).To(BeEmpty(), "all ports among the cluster's own VMs")
	g.Expect(own.To).To(HaveLen(1))
	g.Expect(own.To[0].NamespaceSelector).To(BeNil(), "own VMs in the cluster's namespace only")
	g.Expect(selects(g, own.To[0].PodSelector, launcherLabels("demo"))).To(BeTrue())
	g.Expect(selects(g, own.To[0].PodSelector, launcherLabels("other"))).To(BeFalse())

	g.Expect(dns.Ports).To(HaveLen(2))
	g.Expect(dns.Ports[0].Port.IntValue()).To(Equal(53))
	g.Expect(dns.To).To(HaveLen(1))
	g.Expect(selects(g, dns.To[0].NamespaceSelector, labels.Set{"kubernetes.io/metadata.name": "kube-system"})).To(BeTrue())
	g.Expect(selects(g, dns.To[0].NamespaceSelector, labels.Set{"kubernetes.io/metadata.name": "tenants"})).To(BeFalse(),
		"a pod labelled k8s-app=kube-dns in a tenant's or user's namespace serves no DNS to tenants")
	g.Expect(selects(g, dns.To[0].PodSelector, labels.Set{"k8s-app": "kube-dns"})).To(BeTrue())
	g.Expect(selects(g, dns.To[0].PodSelector, labels.Set{"app": "web"})).To(BeFalse(), "only the DNS pods, not every host pod")
	g.Expect(selects(g, dns.To[0].PodSelector, launcherLabels("other"))).To(BeFalse(), "no tenant VM serves DNS to another")

	g.Expect(outside.To[0].IPBlock.CIDR).To(Equal("0.0.0.0/0"))
	g.Expect(outside.To[0].IPBlock.Except).To(Equal(cluster.PrivateNetworks))
}

// With the guest DNS, the VMs' only DNS server is its Service, and the only DNS
// they reach is its pods, on the Service's target ports: not the host's cluster
// DNS, whose answers name the host's Services.
func TestVMsResolveThroughTheGuestDNSOnly(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "knest-system", Name: "knest-guest-dns"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.53.53",
			Selector:  map[string]string{"app.kubernetes.io/name": "knest-guest-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(1053), Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromString("dns-tcp"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	dns, err := netpol.GuestDNSFromService(svc)
	g.Expect(err).NotTo(HaveOccurred())
	graph, err := cluster.Render(demo(), cluster.Options{GuestDNS: dns})
	g.Expect(err).NotTo(HaveOccurred())

	egress := graph.Isolation.Spec.Egress[1]
	g.Expect(egress.To).To(HaveLen(1))
	g.Expect(selects(g, egress.To[0].NamespaceSelector, labels.Set{"kubernetes.io/metadata.name": "knest-system"})).To(BeTrue())
	g.Expect(selects(g, egress.To[0].NamespaceSelector, labels.Set{"kubernetes.io/metadata.name": "kube-system"})).To(BeFalse(), "the host's cluster DNS")
	g.Expect(selects(g, egress.To[0].PodSelector, labels.Set{"app.kubernetes.io/name": "knest-guest-dns"})).To(BeTrue())
	g.Expect(egress.Ports).To(ConsistOf(
		networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolUDP), Port: ptr(intstr.FromInt32(1053))},
		networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromString("dns-tcp"))}))

	templates := []*capkv1.KubevirtMachineTemplate{graph.ControlPlaneTemplate}
	for _, p := range graph.Pools {
		templates = append(templates, p.MachineTemplate)
	}
	for _, tmpl := range templates {
		vmi := tmpl.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec
		g.Expect(vmi.DNSPolicy).To(Equal(corev1.DNSNone), tmpl.Name)
		g.Expect(vmi.DNSConfig).To(Equal(&corev1.PodDNSConfig{Nameservers: []string{"10.96.53.53"}}), tmpl.Name)
	}

	// Without it, as before: the pod's DNS, the host's.
	graph, err = cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	vmi := graph.ControlPlaneTemplate.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec
	g.Expect(vmi.DNSPolicy).To(BeEmpty())
	g.Expect(vmi.DNSConfig).To(BeNil())

	_, err = netpol.GuestDNSFromService(&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}})
	g.Expect(err).To(MatchError(ContainSubstring("has no cluster IP")))
}
