package nestedcluster_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/apply"
	"github.com/knest-dev/knest/internal/controller/nestedcluster"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
)

// autoscalerManager is the field manager the test's stand-in for the
// cluster-autoscaler writes with.
const autoscalerManager = "cluster-autoscaler"

// managesReplicas reports whether manager owns the MachineDeployment's spec.replicas,
// by the fields it applied or those it created with.
func managesReplicas(md *clusterv1.MachineDeployment, manager string) bool {
	for _, mf := range md.ManagedFields {
		if (mf.Manager == manager || mf.Manager == apply.CreateFieldManager(manager)) && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`) {
			return true
		}
	}
	return false
}

// TestAutoscalerOwnsAnAutoscaledPoolsReplicas: knest hands an autoscaled pool's
// replicas to the autoscaler and neither re-applies nor fights when the autoscaler
// changes them through the scale subresource, even when knest applies the
// MachineDeployment again for a change of its own (new bounds); when autoscaling is
// turned off, knest takes the replicas back.
func TestAutoscalerOwnsAnAutoscaledPoolsReplicas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "auto")
	nc.Spec.Workers[0].Replicas = ptr.To(int32(2))
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	md := graph.Pools[0].MachineDeployment.DeepCopy()
	env.Get(g, md)
	g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(managesReplicas(md, nestedcluster.FieldOwner)).To(BeTrue())

	// The pool becomes autoscaled: knest lets go of replicas and sets the bounds.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Replicas = nil
		nc.Spec.Workers[0].Autoscaling = &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 4}
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, md)
		g.Expect(md.Annotations).To(HaveKeyWithValue(clusterv1.AutoscalerMaxSizeAnnotation, "4"))
		g.Expect(md.Annotations).To(HaveKeyWithValue(clusterv1.AutoscalerMinSizeAnnotation, "1"))
		g.Expect(md.Annotations).To(HaveKeyWithValue(cluster.CapacityCPUAnnotation, "2"))
		g.Expect(md.Annotations).To(HaveKeyWithValue(cluster.CapacityMemoryAnnotation, knestv1.DefaultMemory))
	}, timeout, interval).Should(Succeed())
	g.Expect(managesReplicas(md, nestedcluster.FieldOwner)).To(BeFalse(), "knest must not own an autoscaled pool's replicas")

	// The autoscaler scales the pool as it does: through the scale subresource.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: md.Name, Namespace: md.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	g.Expect(env.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale), client.FieldOwner(autoscalerManager))).To(Succeed())
	env.Get(g, md)
	g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	// (The API server records no managed-fields entry of its own for a write through
	// a custom resource's scale subresource here; what matters is that knest's
	// entry does not hold replicas, so its applies neither reset nor conflict.)
	g.Expect(managesReplicas(md, nestedcluster.FieldOwner)).To(BeFalse())

	// The controller reconciles (the MachineDeployment changed) and reports the
	// autoscaler's choice as the pool's desired size.
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Workers).To(HaveLen(1))
		g.Expect(nc.Status.Workers[0].Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 4}))
		g.Expect(nc.Status.Workers[0].Desired).To(BeEquivalentTo(3))
	}, timeout, interval).Should(Succeed())

	// New bounds make knest apply the MachineDeployment again: the replicas stay the
	// autoscaler's, and the apply succeeds.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Autoscaling = &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 5}
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, md)
		g.Expect(md.Annotations).To(HaveKeyWithValue(clusterv1.AutoscalerMaxSizeAnnotation, "5"))
	}, timeout, interval).Should(Succeed())
	g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)), "knest must leave the autoscaler's replicas")
	g.Expect(managesReplicas(md, nestedcluster.FieldOwner)).To(BeFalse())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.IsTrue(nc, knestv1.TopologyReconciledCondition)).To(BeTrue(), conditions.GetMessage(nc, knestv1.TopologyReconciledCondition))
		g.Expect(nc.Status.Workers[0].Autoscaling).To(HaveField("MaxReplicas", BeEquivalentTo(5)))
	}, timeout, interval).Should(Succeed())

	// Autoscaling off: knest takes the replicas back at the spec's size and drops
	// the annotations.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Autoscaling = nil
		nc.Spec.Workers[0].Replicas = ptr.To(int32(2))
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, md)
		g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(md.Annotations).NotTo(HaveKey(clusterv1.AutoscalerMinSizeAnnotation))
		g.Expect(md.Annotations).NotTo(HaveKey(cluster.CapacityCPUAnnotation))
		g.Expect(managesReplicas(md, nestedcluster.FieldOwner)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Workers[0].Autoscaling).To(BeNil())
		g.Expect(nc.Status.Workers[0].Desired).To(BeEquivalentTo(2))
	}, timeout, interval).Should(Succeed())
}

// TestAutoscaledPoolsApplyWithTheRealSchemas: every shape of autoscaled pool renders
// to a MachineDeployment the real Cluster API schema takes, with the annotations the
// autoscaler reads and no replicas of knest's.
func TestAutoscaledPoolsApplyWithTheRealSchemas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "shapes")
	nc.Spec.Workers = []knestv1.WorkerPool{
		{Name: "zero", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 2}},
		{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 3},
			MachineSpec: knestv1.MachineSpec{CPU: 8, Memory: ptr.To(resource.MustParse("16Gi"))},
			Labels:      map[string]knestv1.LabelValue{"example.com/accelerator": "a10"},
			Taints:      []knestv1.Taint{{Key: "example.com/gpu", Value: "true", Effect: "NoSchedule"}},
			GPUs:        []knestv1.DeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/GA102GL_A10"}}},
		{Name: "fixed", Replicas: ptr.To(int32(1))},
	}
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	mds := map[string]*clusterv1.MachineDeployment{}
	for _, p := range graph.Pools {
		md := p.MachineDeployment.DeepCopy()
		env.Get(g, md)
		mds[p.Name] = md
	}
	g.Expect(mds["zero"].Annotations).To(And(
		HaveKeyWithValue(clusterv1.AutoscalerMinSizeAnnotation, "0"),
		HaveKeyWithValue(clusterv1.AutoscalerMaxSizeAnnotation, "2"),
		Not(HaveKey(cluster.CapacityGPUCountAnnotation)),
	))
	g.Expect(mds["gpu"].Annotations).To(And(
		HaveKeyWithValue(cluster.CapacityCPUAnnotation, "8"),
		HaveKeyWithValue(cluster.CapacityMemoryAnnotation, "16Gi"),
		HaveKeyWithValue(cluster.CapacityGPUCountAnnotation, "1"),
		HaveKeyWithValue(cluster.CapacityGPUTypeAnnotation, "nvidia.com/gpu"),
		HaveKeyWithValue(cluster.CapacityLabelsAnnotation, "example.com/accelerator=a10"),
		HaveKeyWithValue(cluster.CapacityTaintsAnnotation, "example.com/gpu=true:NoSchedule"),
	))
	g.Expect(mds["fixed"].Annotations).NotTo(HaveKey(clusterv1.AutoscalerMinSizeAnnotation))
	g.Expect(mds["fixed"].Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	for _, name := range []string{"zero", "gpu"} {
		g.Expect(managesReplicas(mds[name], nestedcluster.FieldOwner)).To(BeFalse(), name)
	}
}
