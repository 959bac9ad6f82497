package nestedcluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/autoscaler"
)

// An autoscaled pool brings the tenant's cluster-autoscaler, allowed to scale that
// pool's MachineDeployment only; AutoscalerReady follows its Deployment; the last
// pool to stop being autoscaled takes the autoscaler and its rights away.
func TestAutoscalerFollowsAutoscaledPools(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "auto")
	nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "burst", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 2}})
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	g.Expect(graph.Autoscaler).NotTo(BeNil())
	burst := graph.Pools[1].MachineDeployment.Name

	role := &rbacv1.Role{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(graph.Autoscaler.Role), role)).To(Succeed())
	g.Expect(role.Rules).To(ContainElement(And(
		HaveField("Resources", ConsistOf("machinedeployments/scale")),
		HaveField("ResourceNames", ConsistOf(burst)))), "only the autoscaled pool may be scaled")
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(graph.Autoscaler.RoleBinding), binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: autoscaler.Name(nc.Name), Namespace: nc.Namespace}))

	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.AutoscalerReadyCondition)).To(And(
			HaveField("Status", BeEquivalentTo(corev1.ConditionFalse)), HaveField("Reason", knestv1.ProviderStartingReason)))
	}, timeout, interval).Should(Succeed())

	// Its pod passes the health check: no kubelet runs here, so say so in its status.
	deploy := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(graph.Autoscaler.Deployment), deploy)).To(Succeed())
	deploy.Status = appsv1.DeploymentStatus{ObservedGeneration: deploy.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	g.Expect(env.Client.Status().Update(ctx, deploy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.AutoscalerReadyCondition)).To(And(
			HaveField("Status", BeEquivalentTo(corev1.ConditionTrue)), HaveField("Reason", knestv1.ProviderRunningReason)))
	}, timeout, interval).Should(Succeed())

	// Bounds changed: the autoscaler keeps running with the same rights.
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers[1].Autoscaling.MaxReplicas = 3 })
	waitForGraph(g, nc)

	// No pool autoscaled any more: the autoscaler goes, rights first or not, all of it.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[1].Autoscaling = nil
		nc.Spec.Workers[1].Replicas = ptr.To[int32](1)
	})
	for _, obj := range graph.Autoscaler.List() {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
		}, timeout, interval).Should(BeTrue(), "%T %s", obj, obj.GetName())
	}
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Has(nc, knestv1.AutoscalerReadyCondition)).To(BeFalse())
	}, timeout, interval).Should(Succeed())
}
