//go:build e2e

package tenant_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// burstPool is an autoscaled pool of min 0, max 1 that only pods asking for it
// land on (its label and taint), beside the tenant's fixed pool that runs the
// system pods: a pool that runs CoreDNS is never idle, so it cannot go to zero.
const burstPool = "burst"

var (
	burstLabel = "example.com/pool"
	burstTaint = knestv1.Taint{Key: "example.com/burst", Value: "true", Effect: corev1.TaintEffectNoSchedule}
)

// expectPoolAutoscales adds an autoscaled pool at zero to the cluster and checks,
// with no command from anyone, that the tenant's cluster-autoscaler adds a node for
// a pending pod, and removes it (drain, Machine, VM) once the pod is gone.
func expectPoolAutoscales(t *testing.T, key client.ObjectKey, tc tenant) {
	g := NewWithT(t)
	ctx := t.Context()
	step := "autoscaled pool 0 → 1 → 0"
	addBurstPool(t, key, step)

	// A pod only the pool can take: pending until the autoscaler adds a node.
	labels := map[string]string{"app": "burst"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					NodeSelector:                  map[string]string{burstLabel: burstPool},
					Tolerations:                   []corev1.Toleration{{Key: burstTaint.Key, Value: burstTaint.Value, Effect: burstTaint.Effect}},
					Containers: []corev1.Container{{
						Name: "sleep", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
						Command:   []string{"/bin/busybox", "sleep", "infinity"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		},
	}
	pending := time.Now()
	g.Eventually(func() error { return client.IgnoreAlreadyExists(tc.Create(ctx, dep.DeepCopy())) }, tenantTimeout, poll).Should(Succeed())
	var node string
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(tc.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning), "pod %s on node %q", pods.Items[0].Name, pods.Items[0].Spec.NodeName)
		node = pods.Items[0].Spec.NodeName
	}, createTimeout, poll).Should(Succeed())
	s.timeline.add(step, "pending pod Running on a new node", time.Since(pending))
	machine := expectBurstNode(t, key, tc, node)

	// Idle again: the node is drained and removed, the pool back at zero.
	idle := time.Now()
	g.Eventually(func() error { return client.IgnoreNotFound(tc.Delete(ctx, dep.DeepCopy())) }, tenantTimeout, poll).Should(Succeed())
	expectBurstPoolAtZero(t, key, tc, node, machine)
	s.timeline.add(step, "idle → pool at 0, node, machine, VM gone", time.Since(idle))
}

// addBurstPool adds burstPool to the cluster, with the autoscaler's scale-down
// timings short enough for a test, and waits for the autoscaler to be ready and the
// pool at zero.
func addBurstPool(t *testing.T, key client.ObjectKey, step string) {
	g := NewWithT(t)
	ctx := t.Context()
	start := time.Now()
	nc := &knestv1.NestedCluster{}
	g.Eventually(func() error {
		if err := s.host.Get(ctx, key, nc); err != nil {
			return err
		}
		pool := knestv1.WorkerPool{
			Name:        burstPool,
			Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 1},
			Labels:      map[string]knestv1.LabelValue{burstLabel: burstPool},
			Taints:      []knestv1.Taint{burstTaint},
		}
		pool.MachineSpec = nc.Spec.Workers[0].MachineSpec
		nc.Spec.Workers = append(nc.Spec.Workers, pool)
		// Short, so that the test sees the scale-down; the upstream default is 10m.
		nc.Spec.Autoscaler = knestv1.AutoscalerSpec{
			ScaleDownUnneededTime:  &metav1.Duration{Duration: time.Minute},
			ScaleDownDelayAfterAdd: &metav1.Duration{Duration: time.Minute},
		}
		return s.host.Update(ctx, nc)
	}, tenantTimeout, poll).Should(Succeed())

	md := &clusterv1.MachineDeployment{}
	g.Eventually(func(g Gomega) {
		g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
		g.Expect(conditions.IsTrue(nc, knestv1.AutoscalerReadyCondition)).To(BeTrue(), "AutoscalerReady: %s", conditions.GetMessage(nc, knestv1.AutoscalerReadyCondition))
		g.Expect(s.host.Get(ctx, burstPoolKey(key), md)).To(Succeed())
		g.Expect(md.Spec.Replicas).To(HaveValue(BeZero()), "the pool starts at its minimum")
	}, createTimeout, poll).Should(Succeed())
	s.timeline.add(step, "autoscaler ready, pool at 0", time.Since(start))
}

func burstPoolKey(key client.ObjectKey) client.ObjectKey {
	return client.ObjectKey{Namespace: key.Namespace, Name: cluster.PoolName(key.Name, burstPool)}
}

// expectBurstNode expects node to be one of burstPool's and returns its Machine.
func expectBurstNode(t *testing.T, key client.ObjectKey, tc tenant, node string) string {
	g := NewWithT(t)
	n := &corev1.Node{}
	g.Expect(tc.Get(t.Context(), client.ObjectKey{Name: node}, n)).To(Succeed())
	g.Expect(n.Labels).To(HaveKeyWithValue(burstLabel, burstPool), "the pod runs on the autoscaled pool's node")
	return machineOfNode(t, key, node)
}

// expectBurstPoolAtZero waits for the autoscaler to have removed node (drain,
// Machine, VM) and the pool to be back at zero, and checks that knest never took
// the pool's replicas back from the autoscaler meanwhile.
func expectBurstPoolAtZero(t *testing.T, key client.ObjectKey, tc tenant, node, machine string) {
	g := NewWithT(t)
	ctx := t.Context()
	md := &clusterv1.MachineDeployment{}
	g.Eventually(func(g Gomega) {
		err := tc.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "node %s still there (err %v)", node, err)
		g.Expect(s.host.Get(ctx, burstPoolKey(key), md)).To(Succeed())
		g.Expect(md.Spec.Replicas).To(HaveValue(BeZero()))
	}, deleteTimeout+5*time.Minute, poll).Should(Succeed())
	expectGone(t, key.Namespace, machine, node)

	nc := &knestv1.NestedCluster{}
	g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
	for _, p := range nc.Status.Workers {
		if p.Name == burstPool {
			g.Expect(p.Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 1}), fmt.Sprintf("status of pool %s", p.Name))
		}
	}
}
