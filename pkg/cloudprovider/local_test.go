package cloudprovider_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// With externalTrafficPolicy Local the host Service has no selector and its
// endpoints are the worker VMs whose tenant Node runs a ready endpoint, among the
// Nodes the service controller passes; they follow the tenant's endpoints both on
// the service controller's calls and, between them, through the provider's own
// watch.
func TestLocalEndpointsFollowTheNodesWithReadyEndpoints(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	p := b.provider(t, g, "blue")
	lb := loadBalancer(g, p)

	b.vm(g, "blue", "w1", "worker", "host-a", "10.10.0.1")
	b.vm(g, "blue", "w2", "worker", "host-b", "10.10.0.2")
	b.vm(g, "blue", "w3", "worker", "host-a", "10.10.0.3")
	b.vm(g, "blue", "w4", "worker", "host-b", "10.10.0.4")
	b.vm(g, "blue", "cp1", "control-plane", "host-b", "10.10.0.9")
	// Another tenant's VM named like a node of ours is not ours.
	b.vm(g, "green", "g1", "worker", "host-a", "10.10.1.1")
	w1, w2, w3, w4, cp1 := b.node(g, "w1"), b.node(g, "w2"), b.node(g, "w3"), b.node(g, "w4"), b.node(g, "cp1")
	g1 := b.node(g, "g1")
	// w4 runs an endpoint but the service controller leaves it out (excluded from
	// load balancers); cp1 runs one but is not a worker.
	nodes := []*corev1.Node{w1, w2, w3, cp1, g1}

	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyLocal, tcp("http", 80))
	b.endpoints(g, svc, map[*corev1.Node]bool{w1: true, w2: false, w4: true, cp1: true, g1: true})
	ensure(g, lb, "blue", svc, nodes)

	host := b.hostService(g, svc)
	g.Expect(host.Spec.Selector).To(BeEmpty())
	g.Expect(host.Spec.ExternalTrafficPolicy).To(Equal(corev1.ServiceExternalTrafficPolicyLocal))
	g.Expect(b.hostEndpoints(g, svc)).To(Equal([]string{"10.10.0.1@host-a"}))

	slice := &discoveryv1.EndpointSlice{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: host.Name}, slice)).To(Succeed())
	g.Expect(slice.Labels).To(HaveKeyWithValue(discoveryv1.LabelServiceName, host.Name))
	g.Expect(slice.Ports).To(HaveLen(1))
	g.Expect(*slice.Ports[0].Port).To(Equal(svc.Spec.Ports[0].NodePort))
	g.Expect(slice.OwnerReferences).To(HaveLen(1))
	g.Expect(slice.OwnerReferences[0].UID).To(Equal(host.UID))

	// w2's endpoint becomes ready: the next call of the service controller adds it.
	b.endpoints(g, svc, map[*corev1.Node]bool{w1: true, w2: true})
	g.Expect(lb.UpdateLoadBalancer(ctx, "blue", svc, nodes)).To(Succeed())
	g.Expect(b.hostEndpoints(g, svc)).To(Equal([]string{"10.10.0.1@host-a", "10.10.0.2@host-b"}))

	// Between calls, the provider's own watch follows the tenant's endpoints.
	stop := make(chan struct{})
	defer close(stop)
	p.Initialize(nil, stop)
	b.endpoints(g, svc, map[*corev1.Node]bool{w2: true, w3: true})
	g.Eventually(func(g Gomega) []string { return b.hostEndpoints(g, svc) }, timeout, interval).
		Should(Equal([]string{"10.10.0.2@host-b", "10.10.0.3@host-a"}))
	b.endpoints(g, svc, map[*corev1.Node]bool{w2: false})
	g.Eventually(func(g Gomega) []string { return b.hostEndpoints(g, svc) }, timeout, interval).
		Should(BeEmpty())

	// Back to Cluster: the selector returns and the slice goes.
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	g.Expect(env.Client.Update(ctx, svc)).To(Succeed())
	g.Expect(lb.UpdateLoadBalancer(ctx, "blue", svc, nodes)).To(Succeed())
	host = b.hostService(g, svc)
	g.Expect(host.Spec.Selector).To(HaveKeyWithValue("kubevirt.io", "virt-launcher"))
	g.Expect(host.Spec.ExternalTrafficPolicy).To(Equal(corev1.ServiceExternalTrafficPolicyCluster))
	g.Expect(b.hostEndpoints(g, svc)).To(BeNil())
	// The watch, told of another change, does not bring the slice back.
	b.endpoints(g, svc, map[*corev1.Node]bool{w1: true})
	g.Consistently(func(g Gomega) []string { return b.hostEndpoints(g, svc) }, "1s", interval).Should(BeNil())
}

// Cluster, then Local: the host's own controllers wrote endpoints for the host
// Service while it had a selector, and leave them when it loses it; the provider
// deletes them, so that the host sends only to the VMs its own slice lists.
func TestLocalDeletesTheEndpointsOfTheSelector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	lb := loadBalancer(g, b.provider(t, g, "blue"))
	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80))
	ensure(g, lb, "blue", svc, nil)
	host := b.hostService(g, svc)

	managers := func(g Gomega) []string {
		list := &discoveryv1.EndpointSliceList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(b.host), client.MatchingLabels{discoveryv1.LabelServiceName: host.Name})).To(Succeed())
		var out []string
		for _, sl := range list.Items {
			out = append(out, sl.Labels[discoveryv1.LabelManagedBy])
		}
		return out
	}
	// kube-controller-manager's endpoints and EndpointSlice controllers, as on a host.
	g.Eventually(managers, timeout, interval).Should(ContainElement("endpointslice-controller.k8s.io"))
	//nolint:staticcheck // the legacy Endpoints object is what this is about
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(host), &corev1.Endpoints{})
	}, timeout, interval).Should(Succeed())

	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	g.Expect(env.Client.Update(ctx, svc)).To(Succeed())
	g.Expect(lb.UpdateLoadBalancer(ctx, "blue", svc, nil)).To(Succeed())
	g.Eventually(managers, timeout, interval).Should(Equal([]string{"cloudprovider.knest.dev"}))
	g.Consistently(managers, "2s", interval).Should(Equal([]string{"cloudprovider.knest.dev"}), "nothing mirrors it back")
	// The endpoints controller, its cache not yet without the selector, can write
	// its Endpoints again after the delete (seen on a loaded machine); the service
	// controller's next update deletes them again.
	g.Eventually(func() error {
		g.Expect(lb.UpdateLoadBalancer(ctx, "blue", svc, nil)).To(Succeed())
		//nolint:staticcheck // as above
		return env.Client.Get(ctx, client.ObjectKeyFromObject(host), &corev1.Endpoints{})
	}, timeout, interval).Should(Satisfy(isNotFound), "the endpoints controller's Endpoints")
}
