//go:build e2e

package tenant_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
