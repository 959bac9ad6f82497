package cloudprovider_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cloudprovider"
)

func TestEnsureLoadBalancerMakesTheHostService(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80), tcp("https", 443))

	_, exists, err := lb.GetLoadBalancer(ctx, "blue", svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())

	// No address yet: the service controller is told to ask again soon.
	_, err = lb.EnsureLoadBalancer(ctx, "blue", svc, nil)
	var retry *api.RetryError
	g.Expect(errors.As(err, &retry)).To(BeTrue(), "want a RetryError, got %v", err)

	host := b.hostService(g, svc)
	g.Expect(host.Name).To(Equal(lb.GetLoadBalancerName(ctx, "blue", svc)))
	g.Expect(len(host.Name)).To(BeNumerically("<=", 63))
	g.Expect(host.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
	g.Expect(host.Spec.ExternalTrafficPolicy).To(Equal(corev1.ServiceExternalTrafficPolicyCluster))
	g.Expect(host.Spec.Selector).To(Equal(map[string]string{
		"cluster.x-k8s.io/cluster-name": "blue",
		"kubevirt.io":                   "virt-launcher",
		"cluster.x-k8s.io/role":         "worker",
	}))
	g.Expect(host.Labels).To(Equal(map[string]string{
		cloudprovider.ClusterLabel:          "blue",
		cloudprovider.ServiceNamespaceLabel: b.tenant,
		cloudprovider.ServiceNameLabel:      "web",
		cloudprovider.ServiceUIDLabel:       string(svc.UID),
	}))
	g.Expect(host.Spec.Ports).To(HaveLen(2))
	for i, want := range svc.Spec.Ports {
		got := host.Spec.Ports[i]
		g.Expect(got.Name).To(Equal(want.Name))
		g.Expect(got.Port).To(Equal(want.Port))
		g.Expect(got.Protocol).To(Equal(corev1.ProtocolTCP))
		g.Expect(got.TargetPort).To(Equal(intstr.FromInt32(want.NodePort)), "port %s targets the tenant's node port", want.Name)
	}

	// The host load balancer's address is the tenant's.
	setAddress(g, host, "192.0.2.10")
	status, err := lb.EnsureLoadBalancer(ctx, "blue", svc, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Ingress).To(Equal([]corev1.LoadBalancerIngress{{IP: "192.0.2.10", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}))
	status, exists, err = lb.GetLoadBalancer(ctx, "blue", svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeTrue())
	g.Expect(status.Ingress[0].IP).To(Equal("192.0.2.10"))
}

func TestUpdateLoadBalancerFollowsThePorts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80), tcp("https", 443))
	ensure(g, lb, "blue", svc, nil)

	// Drop https, add dns over UDP.
	svc.Spec.Ports = []corev1.ServicePort{svc.Spec.Ports[0], {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	g.Expect(env.Client.Update(ctx, svc)).To(Succeed())
	g.Expect(lb.UpdateLoadBalancer(ctx, "blue", svc, nil)).To(Succeed())

	host := b.hostService(g, svc)
	type port struct {
		name     string
		port     int32
		protocol corev1.Protocol
		target   intstr.IntOrString
	}
	var got []port
	for _, p := range host.Spec.Ports {
		got = append(got, port{p.Name, p.Port, p.Protocol, p.TargetPort})
	}
	g.Expect(got).To(ConsistOf(
		port{"http", 80, corev1.ProtocolTCP, intstr.FromInt32(svc.Spec.Ports[0].NodePort)},
		port{"dns", 53, corev1.ProtocolUDP, intstr.FromInt32(svc.Spec.Ports[1].NodePort)},
	))
}

func TestEnsureLoadBalancerDeletedIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80))

	g.Expect(lb.EnsureLoadBalancerDeleted(ctx, "blue", svc)).To(Succeed(), "nothing to delete yet")
	ensure(g, lb, "blue", svc, nil)
	b.hostService(g, svc)

	g.Expect(lb.EnsureLoadBalancerDeleted(ctx, "blue", svc)).To(Succeed())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, &corev1.Service{})
	g.Expect(isNotFound(err)).To(BeTrue(), "host Service still there: %v", err)
	g.Expect(lb.EnsureLoadBalancerDeleted(ctx, "blue", svc)).To(Succeed(), "already deleted")
	_, exists, err := lb.GetLoadBalancer(ctx, "blue", svc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())
}

// Two tenants' load balancers in one host namespace: each provider writes and
// deletes its own only, even when handed the other tenant's Service.
func TestTenantsSharingANamespaceKeepToTheirOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	blue, green := loadBalancer(g, b.provider(t, g, "blue")), loadBalancer(g, b.provider(t, g, "green"))
	other := &bed{host: b.host, tenant: namespace(t, g)}
	blueSvc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80))
	greenSvc := other.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 8080))

	ensure(g, blue, "blue", blueSvc, nil)
	ensure(g, green, "green", greenSvc, nil)
	g.Expect(b.hostService(g, blueSvc).Spec.Selector).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "blue"))
	g.Expect(b.hostService(g, greenSvc).Spec.Selector).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "green"))

	// green is handed blue's Service: it neither rewrites nor deletes blue's host Service.
	_, err := green.EnsureLoadBalancer(ctx, "green", blueSvc, nil)
	g.Expect(err).To(MatchError(ContainSubstring("is not the load balancer")))
	g.Expect(green.EnsureLoadBalancerDeleted(ctx, "green", blueSvc)).To(Succeed(), "green has nothing of that Service's to delete")
	_, _, err = green.GetLoadBalancer(ctx, "green", blueSvc)
	g.Expect(err).To(HaveOccurred())
	host := b.hostService(g, blueSvc)
	g.Expect(host.Labels).To(HaveKeyWithValue(cloudprovider.ClusterLabel, "blue"))
	g.Expect(host.Spec.Selector).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "blue"))

	// Deleting green's leaves blue's.
	g.Expect(green.EnsureLoadBalancerDeleted(ctx, "green", greenSvc)).To(Succeed())
	b.hostService(g, blueSvc)
}

// A port without a node port cannot be forwarded to the VMs: the provider says so.
func TestEnsureLoadBalancerRefusesAServiceWithoutNodePorts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := &corev1.Service{}
	svc.Name, svc.Namespace, svc.UID = "web", b.tenant, "0000-1111"
	svc.Spec = corev1.ServiceSpec{
		Type:                          corev1.ServiceTypeLoadBalancer,
		AllocateLoadBalancerNodePorts: ptr.To(false),
		Ports:                         []corev1.ServicePort{tcp("http", 80)},
	}
	_, err := lb.EnsureLoadBalancer(ctx, "blue", svc, nil)
	g.Expect(err).To(MatchError(ContainSubstring("has no node port")))
}

// The host NetworkPolicy lets traffic in to the worker VMs on the node ports of the
// Service, and on nothing else; it follows the ports and goes with the Service.
func TestLoadBalancerNetworkPolicyOpensOnlyTheNodePorts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80), tcp("https", 443))
	ensure(g, lb, "blue", svc, nil)

	host := b.hostService(g, svc)
	np := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, np)).To(Succeed())
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(host.Spec.Selector), "the worker VMs the host Service sends to")
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].From).To(BeEmpty(), "load-balancer traffic comes from anywhere")
	var ports []intstr.IntOrString
	for _, p := range np.Spec.Ingress[0].Ports {
		g.Expect(*p.Protocol).To(Equal(corev1.ProtocolTCP))
		ports = append(ports, *p.Port)
	}
	g.Expect(ports).To(ConsistOf(intstr.FromInt32(svc.Spec.Ports[0].NodePort), intstr.FromInt32(svc.Spec.Ports[1].NodePort)))
	g.Expect(np.OwnerReferences).To(ConsistOf(HaveField("UID", host.UID)), "goes with the host Service")

	// A port removed from the Service is closed again.
	svc.Spec.Ports = svc.Spec.Ports[:1]
	g.Expect(env.Client.Update(ctx, svc)).To(Succeed())
	ensure(g, lb, "blue", svc, nil)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, np)).To(Succeed())
	g.Expect(np.Spec.Ingress[0].Ports).To(ConsistOf(HaveField("Port", HaveValue(Equal(intstr.FromInt32(svc.Spec.Ports[0].NodePort))))))

	g.Expect(lb.EnsureLoadBalancerDeleted(ctx, "blue", svc)).To(Succeed())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, &networkingv1.NetworkPolicy{})
	g.Expect(isNotFound(err)).To(BeTrue(), "host NetworkPolicy still there: %v", err)
}

// A node port outside the node-port range would open another port of the VMs (the
// kubelet's, SSH): refused, and nothing is made.
func TestEnsureLoadBalancerRefusesNodePortsOutsideTheRange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := &corev1.Service{}
	svc.Name, svc.Namespace, svc.UID = "web", b.tenant, "0000-2222"
	port := tcp("kubelet", 80)
	port.NodePort = 10250
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{port}}
	_, err := lb.EnsureLoadBalancer(ctx, "blue", svc, nil)
	g.Expect(err).To(MatchError(ContainSubstring("outside 30000-32767")))
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, &corev1.Service{})
	g.Expect(isNotFound(err)).To(BeTrue(), "no host Service: %v", err)
}
