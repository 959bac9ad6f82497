package nestedcluster_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/ccm"
	"github.com/knest-dev/knest/pkg/cloudprovider"
)

// Every tenant gets a cloud controller manager running the knest image, with the
// rights of pkg/ccm in its namespace; LoadBalancerReady follows its Deployment.
// Turned off, it goes, and so do the host load balancers it made, not another
// tenant's.
func TestLoadBalancerProviderFollowsTheSpec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "web")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	g.Expect(graph.CloudControllerManager).NotTo(BeNil(), "on by default")
	objs := graph.CloudControllerManager

	role := &rbacv1.Role{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(objs.Role), role)).To(Succeed())
	g.Expect(role.Rules).To(Equal(ccm.Rules()))
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(objs.RoleBinding), binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ccm.Name(nc.Name), Namespace: ns}))
	deploy := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), deploy)).To(Succeed())
	c := deploy.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(testToolImage), "the controller's own knest image")
	g.Expect(c.Args).To(ContainElements("cloud-controller-manager", "--cluster=web", "--namespace="+ns))

	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.LoadBalancerReadyCondition)).To(And(
			HaveField("Status", BeEquivalentTo(corev1.ConditionFalse)), HaveField("Reason", knestv1.ProviderStartingReason)))
	}, timeout, interval).Should(Succeed())
	// No kubelet runs here: say in its status that its pod is ready.
	deploy.Status = appsv1.DeploymentStatus{ObservedGeneration: deploy.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	g.Expect(env.Client.Status().Update(ctx, deploy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.LoadBalancerReadyCondition)).To(And(
			HaveField("Status", BeEquivalentTo(corev1.ConditionTrue)), HaveField("Reason", knestv1.ProviderRunningReason)))
	}, timeout, interval).Should(Succeed())

	// What the provider made for a tenant Service, and another tenant's in the same
	// namespace.
	mine := hostLoadBalancer(g, ns, "web", "a1")
	theirs := hostLoadBalancer(g, ns, "other", "a2")

	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Providers.LoadBalancer.Disabled = true })
	for _, obj := range append(objs.List(), mine...) {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
		}, timeout, interval).Should(BeTrue(), "%T %s", obj, obj.GetName())
	}
	for _, obj := range theirs {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "another tenant's %T stays", obj)
	}
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Has(nc, knestv1.LoadBalancerReadyCondition)).To(BeFalse())
	}, timeout, interval).Should(Succeed())
}

// hostLoadBalancer makes the host Service and NetworkPolicy a cloud controller
// manager makes for a tenant Service of cluster.
func hostLoadBalancer(g Gomega, ns, cluster, name string) []client.Object {
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{cloudprovider.ClusterLabel: cluster}}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Type:  corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
	}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: *meta.DeepCopy(), Spec: networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}}
	for _, obj := range []client.Object{svc, np} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}
	return []client.Object{svc, np}
}

// The CSI driver's controller runs for every tenant unless storage is off;
// StorageReady follows its Deployment.
func TestStorageProviderReadiness(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "db")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	g.Expect(graph.Storage).NotTo(BeNil(), "on by default")
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.GetReason(nc, knestv1.StorageReadyCondition)).To(Equal(knestv1.ProviderStartingReason))
	}, timeout, interval).Should(Succeed())
	deploy := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(graph.Storage.Deployment), deploy)).To(Succeed())
	deploy.Status = appsv1.DeploymentStatus{ObservedGeneration: deploy.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	g.Expect(env.Client.Status().Update(ctx, deploy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.IsTrue(nc, knestv1.StorageReadyCondition)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	off := testenv.NestedCluster(nc.Namespace, "nostorage")
	off.Spec.Providers.Storage.Disabled = true
	g.Expect(env.Client.Create(ctx, off)).To(Succeed())
	g.Expect(waitForGraph(g, off).Storage).To(BeNil())
	g.Consistently(func(g Gomega) {
		env.Get(g, off)
		g.Expect(conditions.Has(off, knestv1.StorageReadyCondition)).To(BeFalse())
	}, 2*time.Second, interval).Should(Succeed())
}
