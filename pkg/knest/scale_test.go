package knest_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/scale"
	"github.com/knest-dev/knest/pkg/upgrade"
)

func annotations(g Gomega, t *testing.T, ns, name string) map[string]string {
	m := &clusterv1.Machine{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m)).To(Succeed())
	return m.Annotations
}

func sizes(nc *knestv1.NestedCluster) map[string]int32 {
	out := map[string]int32{knestv1.ControlPlanePool: nc.Spec.ControlPlane.Replicas}
	for _, p := range nc.Spec.Workers {
		out[p.Name] = *p.Replicas
	}
	return out
}

func TestScaleMarksNamedMachinesAndPatchesSpec(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 3), pool("gpu", 1))
	for _, m := range []string{"demo-workers-aaaaa", "demo-workers-bbbbb", "demo-workers-ccccc"} {
		createMachine(t, ns, "demo", "workers", m)
	}
	createMachine(t, ns, "demo", "gpu", "demo-gpu-ddddd")
	createMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-eeeee")
	createMachine(t, ns, "other", "workers", "other-workers-fffff")
	before := getCluster(g, t.Context(), key)

	c, out := newClient(t)
	_, err := c.Scale(t.Context(), key, scale.Request{Workers: ptr.To[int32](1), ControlPlane: ptr.To[int32](3),
		RemoveNodes: []string{"demo-workers-ccccc", "demo-workers-aaaaa"}})
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(out.String()).To(ContainSubstring("✓ cluster demo scaling: control plane 1 -> 3, pool workers 3 -> 1"))
	g.Expect(out.String()).To(ContainSubstring("✓ node demo-workers-ccccc marked for removal"))

	nc := getCluster(g, t.Context(), key)
	g.Expect(sizes(nc)).To(Equal(map[string]int32{"control-plane": 3, "workers": 1, "gpu": 1}))
	g.Expect(nc.Spec.Workers[0].Memory).To(Equal(before.Spec.Workers[0].Memory), "the rest of the spec is untouched")
	g.Expect(annotations(g, t, ns, "demo-workers-aaaaa")).To(HaveKeyWithValue(clusterv1.DeleteMachineAnnotation, knest.DeleteMachineValue))
	g.Expect(annotations(g, t, ns, "demo-workers-ccccc")).To(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(annotations(g, t, ns, "demo-workers-bbbbb")).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(annotations(g, t, ns, "demo-gpu-ddddd")).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation))

	// A pool to zero and back.
	_, err = c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 0}, RemoveNodes: []string{"demo-gpu-ddddd"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sizes(getCluster(g, t.Context(), key))["gpu"]).To(Equal(int32(0)))
	g.Expect(annotations(g, t, ns, "demo-gpu-ddddd")).To(HaveKey(clusterv1.DeleteMachineAnnotation))
	_, err = c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sizes(getCluster(g, t.Context(), key))["gpu"]).To(Equal(int32(2)))

	// Nothing to change: nothing written, even with a wait asked for.
	generation := getCluster(g, t.Context(), key).Generation
	plan, err := c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 2}}, knest.ScaleWithWait(time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Changes).To(BeEmpty())
	g.Expect(out.String()).To(ContainSubstring("already has that size; nothing to change"))
	g.Expect(getCluster(g, t.Context(), key).Generation).To(Equal(generation))
}

// What the rules refuse changes nothing and marks no machine.
func TestScaleRefusesWhatTheRulesForbid(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 2), pool("gpu", 1))
	createMachine(t, ns, "demo", "workers", "demo-workers-aaaaa")
	createMachine(t, ns, "demo", "workers", "demo-workers-bbbbb")
	createMachine(t, ns, "demo", "gpu", "demo-gpu-ccccc")
	before := getCluster(g, t.Context(), key)
	c, _ := newClient(t)

	tests := []struct {
		req  scale.Request
		want string
	}{
		{scale.Request{Pools: map[string]int32{"tpu": 1}}, `cannot scale cluster demo: the cluster has no worker pool "tpu"; its pools are workers, gpu`},
		{scale.Request{ControlPlane: ptr.To[int32](2)}, "the control plane cannot have 2 nodes: it needs 1, 3, 5 or 7"},
		{scale.Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"demo-gpu-ccccc"}}, "node demo-gpu-ccccc belongs to pool gpu, which this request does not scale down"},
		{scale.Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"demo-workers-aaaaa", "demo-workers-bbbbb"}}, "2 nodes of pool workers are named for removal but it shrinks by only 1"},
		{scale.Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"nope"}}, "node nope is not a node of this cluster; its nodes are demo-gpu-ccccc, demo-workers-aaaaa, demo-workers-bbbbb"},
		{scale.Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"tpu": {MaxReplicas: 2}}}, `the cluster has no worker pool "tpu"; its pools are workers, gpu`},
		{scale.Request{Workers: ptr.To[int32](-1)}, "the default pool cannot have -1 nodes"},
	}
	for _, tt := range tests {
		_, err := c.Scale(t.Context(), key, tt.req)
		g.Expect(err).To(MatchError(ContainSubstring(tt.want)), "request %+v", tt.req)
	}
	after := getCluster(g, t.Context(), key)
	g.Expect(after.Spec).To(Equal(before.Spec))
	g.Expect(after.Generation).To(Equal(before.Generation))
	for _, m := range []string{"demo-workers-aaaaa", "demo-workers-bbbbb", "demo-gpu-ccccc"} {
		g.Expect(annotations(g, t, ns, m)).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation), "a refused request marks nothing")
	}

	_, err := c.Scale(t.Context(), client.ObjectKey{Namespace: ns, Name: "nope"}, scale.Request{Workers: ptr.To[int32](1)})
	g.Expect(err).To(MatchError("cluster nope not found in namespace " + ns))
}

func TestScaleWaitsForTheNewSize(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1))
	setStatus(t, key, knesttest.Ready)
	c, out := newClient(t)

	done := make(chan error, 1)
	go func() {
		_, err := c.Scale(t.Context(), key, scale.Request{Workers: ptr.To[int32](3)}, knest.ScaleWithWait(time.Minute))
		done <- err
	}()
	g.Eventually(func() int32 { return *getCluster(g, t.Context(), key).Spec.Workers[0].Replicas }, 10*time.Second).Should(Equal(int32(3)))
	// The old status (generation 1, 1/1 ready) must not count as converged.
	g.Consistently(done, time.Second).ShouldNot(Receive())
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		knesttest.Ready(nc)
		nc.Status.Workers[0].Ready = 2
		nc.Status.Phase = knestv1.PhaseScaling
		nc.Status.Conditions[0] = knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.ScalingUpReason, "2 of 3 workers ready")
	})
	g.Consistently(done, time.Second).ShouldNot(Receive())
	setStatus(t, key, knesttest.Ready)

	g.Eventually(done, 30*time.Second).Should(Receive(BeNil()))
	g.Expect(out.String()).To(And(ContainSubstring("✓ workers 3/3 ready"), ContainSubstring("✓ cluster demo is ready")))
	g.Expect(out.String()).NotTo(ContainSubstring("workers 1/1 ready"))
}

func TestScaleTimeoutSaysWhatStaysAndHowToUndoIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1), pool("gpu", 2))
	setStatus(t, key, knesttest.Ready)
	c, _ := newClient(t)

	_, err := c.Scale(t.Context(), key, scale.Request{Workers: ptr.To[int32](3), Pools: map[string]int32{"gpu": 0}}, knest.ScaleWithWait(2*time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be ready")))
	g.Expect(err).To(MatchError(HaveSuffix("\nThe change (pool workers 1 -> 3, pool gpu 2 -> 0) stays applied and the controller keeps working on it; " +
		"to undo it: knest scale demo -n " + ns + " --pool workers=1 --pool gpu=2")))
}

// Cluster API creates no machines for a pool held at an older minor than the
// control plane (MachineSet preflight check KubeadmVersionSkew), so knest refuses
// before it changes anything, and says what to do; shrinking it is fine.
func TestScaleRefusesToGrowAHeldPool(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: knestv1.NestedClusterSpec{Version: "v1.34.4", Workers: []knestv1.WorkerPool{pool("workers", 1), pool("gpu", 2)}}}
	g.Expect(env.Client.Create(t.Context(), nc)).To(Succeed())
	key := client.ObjectKeyFromObject(nc)
	c, _ := newClient(t)
	_, err := c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.4", HoldPools: []string{"gpu"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getCluster(g, t.Context(), key).Spec.Workers[1].Version).To(Equal("v1.34.4"))
	before := getCluster(g, t.Context(), key)

	_, err = c.Scale(t.Context(), key, scale.Request{Workers: ptr.To[int32](2), Pools: map[string]int32{"gpu": 3}})
	g.Expect(err).To(MatchError("cannot scale cluster demo: pool gpu is held at v1.34.4 and the control plane runs v1.35.4: " +
		"Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew), " +
		"so the pool cannot grow (nor have a failed node replaced); let it catch up first " +
		"(knest upgrade <cluster> --version v1.35.4 --release-pool gpu), then scale it"))
	after := getCluster(g, t.Context(), key)
	g.Expect(after.Generation).To(Equal(before.Generation), "a refused request changes nothing, not even the other pool")

	// The API server refuses the same, for whoever bypasses the library.
	after.Spec.Workers[1].Replicas = ptr.To[int32](3)
	g.Expect(env.Client.Update(t.Context(), after)).To(MatchError(ContainSubstring(kubever.HeldPoolGrowMessage)))

	_, err = c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 1}})
	g.Expect(err).NotTo(HaveOccurred(), "a held pool can shrink")
	g.Expect(sizes(getCluster(g, t.Context(), key))["gpu"]).To(Equal(int32(1)))
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.4", ReleasePools: []string{"gpu"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 3}})
	g.Expect(err).NotTo(HaveOccurred(), "a released pool grows")
}

func TestScaleAutoscaledPool(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 2), knestv1.WorkerPool{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 4}})
	nc := getCluster(g, t.Context(), key)
	g.Expect(nc.Spec.Workers[1]).To(And(HaveField("Replicas", BeNil()), HaveField("Autoscaling", Equal(&knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 4}))),
		"the API server keeps an autoscaled pool without replicas")
	c, out := newClient(t)

	// Its size is the autoscaler's: refused, saying what to do instead.
	_, err := c.Scale(t.Context(), key, scale.Request{Pools: map[string]int32{"gpu": 3}})
	g.Expect(err).To(MatchError(ContainSubstring("pool gpu is autoscaled (0 to 4 nodes): the autoscaler sets its size; change its bounds with --autoscale gpu=MIN:MAX, " +
		"or turn autoscaling off and size it yourself with --autoscale gpu=off --pool gpu=N")))
	g.Expect(getCluster(g, t.Context(), key).Generation).To(Equal(nc.Generation))

	// New bounds.
	_, err = c.Scale(t.Context(), key, scale.Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": {MinReplicas: 1, MaxReplicas: 6}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(ContainSubstring("✓ cluster demo scaling: pool gpu auto 0-4 -> auto 1-6"))
	g.Expect(getCluster(g, t.Context(), key).Spec.Workers[1].Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 6}))

	// Off: the pool keeps the size the autoscaler last set, as the controller reports it.
	nc = getCluster(g, t.Context(), key)
	nc.Status.Workers = []knestv1.PoolStatus{
		{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2}},
		{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 6}, ReplicaStatus: knestv1.ReplicaStatus{Desired: 3, Ready: 3, Current: 3}},
	}
	g.Expect(env.Client.Status().Update(t.Context(), nc)).To(Succeed())
	_, err = c.Scale(t.Context(), key, scale.Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(ContainSubstring("✓ cluster demo scaling: pool gpu auto 1-6 -> 3"))
	nc = getCluster(g, t.Context(), key)
	g.Expect(nc.Spec.Workers[1].Autoscaling).To(BeNil())
	g.Expect(nc.Spec.Workers[1].Replicas).To(HaveValue(BeEquivalentTo(3)))

	// The default pool, by the name "", and back with a size of its own.
	_, err = c.Scale(t.Context(), key, scale.Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"": {MinReplicas: 1, MaxReplicas: 3}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(ContainSubstring("pool workers 2 -> auto 1-3"))
	_, err = c.Scale(t.Context(), key, scale.Request{Workers: ptr.To[int32](2)})
	g.Expect(err).To(MatchError(ContainSubstring("pool workers is autoscaled (1 to 3 nodes)")))
	_, err = c.Scale(t.Context(), key, scale.Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"workers": nil}, Workers: ptr.To[int32](5)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getCluster(g, t.Context(), key).Spec.Workers[0].Replicas).To(HaveValue(BeEquivalentTo(5)))
}
