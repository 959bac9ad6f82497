//go:build e2e

package tenant_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cloudprovider"
)

// lbPoll is finer than poll: the step's figures (address, first answer) are
// seconds.
const lbPoll = time.Second

// expectLoadBalancerAnswers makes a tenant Service of type LoadBalancer in front of
// the echo pods (expectServiceAnswers) and checks that the host's load balancer
// gives it an address that answers this machine, outside the tenant and the host,
// with externalTrafficPolicy Cluster and then Local; deleted, it leaves nothing on
// the host.
func expectLoadBalancerAnswers(t *testing.T, key client.ObjectKey, tc tenant) {
	g := NewWithT(t)
	ctx := t.Context()
	step := "LoadBalancer Service"
	nc := &knestv1.NestedCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
		g.Expect(conditions.IsTrue(nc, knestv1.LoadBalancerReadyCondition)).To(BeTrue(),
			"LoadBalancerReady: %s", conditions.GetMessage(nc, knestv1.LoadBalancerReadyCondition))
	}, tenantTimeout, poll).Should(Succeed())

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: echoName + "-lb", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": echoName},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	start := time.Now()
	g.Eventually(func() error {
		return client.IgnoreAlreadyExists(tc.Create(ctx, svc.DeepCopy()))
	}, tenantTimeout, poll).Should(Succeed())
	var address string
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		g.Expect(svc.Status.LoadBalancer.Ingress).NotTo(BeEmpty(), "the tenant Service's address")
		address = svc.Status.LoadBalancer.Ingress[0].IP
	}, tenantTimeout, lbPoll).Should(Succeed())
	s.timeline.add(step, "address "+address, time.Since(start))
	url := "http://" + net.JoinHostPort(address, "80") + "/"
	expectAnswers(g, url)
	s.timeline.add(step, "first answer from outside (Cluster)", time.Since(start))

	// The host side: one Service of the cluster's, fenced to its node ports.
	hostSvcs := &corev1.ServiceList{}
	g.Expect(s.host.List(ctx, hostSvcs, client.InNamespace(key.Namespace), client.MatchingLabels{cloudprovider.ClusterLabel: key.Name})).To(Succeed())
	g.Expect(hostSvcs.Items).To(HaveLen(1))
	host := hostSvcs.Items[0]
	g.Expect(host.Status.LoadBalancer.Ingress).To(ContainElement(HaveField("IP", address)))
	np := &networkingv1.NetworkPolicy{}
	g.Expect(s.host.Get(ctx, client.ObjectKeyFromObject(&host), np)).To(Succeed())
	g.Expect(np.Spec.Ingress).To(ConsistOf(HaveField("Ports", ConsistOf(HaveField("Port", HaveValue(Equal(intstr.FromInt32(svc.Spec.Ports[0].NodePort))))))))

	// Local: the host sends only to the VMs that run an echo pod, which answer with
	// the client's address kept.
	start = time.Now()
	g.Eventually(func() error {
		if err := tc.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		return tc.Update(ctx, svc)
	}, tenantTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		h := &corev1.Service{}
		g.Expect(s.host.Get(ctx, client.ObjectKeyFromObject(&host), h)).To(Succeed())
		g.Expect(h.Spec.ExternalTrafficPolicy).To(Equal(corev1.ServiceExternalTrafficPolicyLocal))
		g.Expect(h.Spec.Selector).To(BeEmpty())
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(s.host.List(ctx, slices, client.InNamespace(key.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: h.Name})).To(Succeed())
		var endpoints int
		for _, sl := range slices.Items {
			endpoints += len(sl.Endpoints)
		}
		g.Expect(endpoints).To(Equal(len(echoNodes(ctx, g, tc))), "one endpoint per VM that runs an echo pod")
	}, tenantTimeout, lbPoll).Should(Succeed())
	expectAnswers(g, url)
	s.timeline.add(step, "Local: answers from the VMs with an echo pod", time.Since(start))

	start = time.Now()
	g.Expect(tc.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}, &discoveryv1.EndpointSliceList{}} {
			g.Expect(s.host.List(ctx, l, client.InNamespace(key.Namespace), client.MatchingLabels{cloudprovider.ClusterLabel: key.Name})).To(Succeed())
			g.Expect(itemsOf(l)).To(BeEmpty(), "%T of the load balancer left on the host", l)
		}
	}, tenantTimeout, lbPoll).Should(Succeed())
	s.timeline.add(step, "deleted: nothing left on the host", time.Since(start))
}

// expectAnswers waits until an HTTP GET of url from this machine gets the echo
// pods' page.
func expectAnswers(g Gomega, url string) {
	c := &http.Client{Timeout: 5 * time.Second}
	g.Eventually(func(g Gomega) {
		resp, err := c.Get(url)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring("hello from " + echoName))
	}, tenantTimeout, lbPoll).Should(Succeed(), "GET %s from outside the tenant", url)
}

// echoNodes are the tenant nodes that run a ready echo pod.
func echoNodes(ctx context.Context, g Gomega, tc tenant) map[string]bool {
	pods := &corev1.PodList{}
	g.Expect(tc.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": echoName})).To(Succeed())
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp.IsZero() {
				nodes[p.Spec.NodeName] = true
			}
		}
	}
	return nodes
}
