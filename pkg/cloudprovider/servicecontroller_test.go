package cloudprovider_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubernetes' own service controller, as a cloud-controller-manager runs it, drives
// the provider: a tenant Service of type LoadBalancer gets the host load
// balancer's address, and deleting it deletes the host Service.
func TestServiceControllerGivesTheTenantServiceTheHostAddress(t *testing.T) {
	g := NewWithT(t)
	b := newBed(t, g)
	p := b.provider(t, g, "blue")

	// Services of the tenant namespace only: the host Services in other namespaces
	// of this one API server are not the tenant's.
	factory := informers.NewSharedInformerFactoryWithOptions(b.tenantClient, 0, informers.WithNamespace(b.tenant))
	sc, err := servicecontroller.New(p, b.tenantClient, factory.Core().V1().Services(), factory.Core().V1().Nodes(),
		"blue", featuregate.NewFeatureGate())
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Run(ctx, 1, controllersmetrics.NewControllerManagerMetrics("knest-test"))
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	svc := b.tenantService(g, "web", corev1.ServiceExternalTrafficPolicyCluster, tcp("http", 80))
	host := &corev1.Service{}
	g.Eventually(func(g Gomega) { host = b.hostService(g, svc) }, timeout, interval).Should(Succeed())
	g.Expect(host.Spec.Ports[0].TargetPort.IntValue()).To(Equal(int(svc.Spec.Ports[0].NodePort)))

	setAddress(g, host, "192.0.2.20")
	g.Eventually(func(g Gomega) []corev1.LoadBalancerIngress {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		return svc.Status.LoadBalancer.Ingress
	}, timeout, interval).Should(ContainElement(HaveField("IP", "192.0.2.20")))

	// The service controller's finalizer holds the tenant Service until the host
	// Service is gone.
	g.Expect(env.Client.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(isNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(host), &corev1.Service{}))).To(BeTrue(), "host Service")
		g.Expect(isNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))).To(BeTrue(), "tenant Service")
	}, timeout, interval).Should(Succeed())
}
