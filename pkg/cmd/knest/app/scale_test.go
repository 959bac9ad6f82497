package app_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/kubever"
)

// createMachine creates a Cluster API Machine of pool the way a MachineDeployment
// rendered by knest would, with its Node joined under the same name.
func createMachine(t *testing.T, ns, clusterName, pool, name string) {
	t.Helper()
	g := NewWithT(t)
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName, knestv1.ClusterNameLabel: clusterName}
	if pool == knestv1.ControlPlanePool {
		labels[clusterv1.MachineControlPlaneLabel] = ""
		labels[knestv1.PoolNameLabel] = knestv1.ControlPlanePool
	} else {
		labels[knestv1.PoolNameLabel] = pool
		labels[clusterv1.MachineDeploymentNameLabel] = cluster.PoolName(clusterName, pool)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: name,
			},
		},
	}
	g.Expect(env.Client.Create(t.Context(), m)).To(Succeed())
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
	g.Expect(env.Client.Status().Update(t.Context(), m)).To(Succeed())
}

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
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "3", "--pool", "gpu=1").err).To(Succeed())
	for _, m := range []string{"demo-workers-aaaaa", "demo-workers-bbbbb", "demo-workers-ccccc"} {
		createMachine(t, ns, "demo", "workers", m)
	}
	createMachine(t, ns, "demo", "gpu", "demo-gpu-ddddd")
	createMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-eeeee")
	createMachine(t, ns, "other", "workers", "other-workers-fffff")

	r := knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--workers", "1", "--control-plane", "3",
		"--remove-node", "demo-workers-ccccc", "--remove-node", "demo-workers-aaaaa")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo scaling: control plane 1 -> 3, pool workers 3 -> 1"))
	g.Expect(r.stderr).To(ContainSubstring("✓ node demo-workers-ccccc marked for removal"))

	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(sizes(nc)).To(Equal(map[string]int32{"control-plane": 3, "workers": 1, "gpu": 1}))
	g.Expect(nc.Spec.Workers[0].Memory.String()).To(Equal("4Gi"), "the rest of the spec is untouched")
	g.Expect(annotations(g, t, ns, "demo-workers-aaaaa")).To(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(annotations(g, t, ns, "demo-workers-ccccc")).To(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(annotations(g, t, ns, "demo-workers-bbbbb")).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(annotations(g, t, ns, "demo-gpu-ddddd")).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation))

	// A pool to zero and back.
	g.Expect(knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--pool", "gpu=0", "--remove-node", "demo-gpu-ddddd").err).To(Succeed())
	g.Expect(sizes(getCluster(g, t.Context(), ns, "demo"))["gpu"]).To(Equal(int32(0)))
	g.Expect(annotations(g, t, ns, "demo-gpu-ddddd")).To(HaveKey(clusterv1.DeleteMachineAnnotation))
	g.Expect(knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--pool", "gpu=2").err).To(Succeed())
	g.Expect(sizes(getCluster(g, t.Context(), ns, "demo"))["gpu"]).To(Equal(int32(2)))

	// Nothing to change.
	r = knest(t, "", "scale", "demo", "-n", ns, "--pool", "gpu=2")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.stderr).To(ContainSubstring("already has that size; nothing to change"))
}

func TestScaleRefusesWhatTheRulesForbid(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "2", "--pool", "gpu=1").err).To(Succeed())
	createMachine(t, ns, "demo", "workers", "demo-workers-aaaaa")
	createMachine(t, ns, "demo", "workers", "demo-workers-bbbbb")
	createMachine(t, ns, "demo", "gpu", "demo-gpu-ccccc")
	before := getCluster(g, t.Context(), ns, "demo")

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--pool", "tpu=1"}, `cannot scale cluster demo: the cluster has no worker pool "tpu"; its pools are workers, gpu`},
		{[]string{"--control-plane", "2"}, "the control plane cannot have 2 nodes: it needs 1, 3, 5 or 7"},
		{[]string{"--workers", "1", "--remove-node", "demo-gpu-ccccc"}, "node demo-gpu-ccccc belongs to pool gpu, which this request does not scale down"},
		{[]string{"--workers", "1", "--remove-node", "demo-workers-aaaaa", "--remove-node", "demo-workers-bbbbb"}, "2 nodes of pool workers are named for removal but it shrinks by only 1"},
		{[]string{"--workers", "1", "--remove-node", "nope"}, "node nope is not a node of this cluster; its nodes are demo-gpu-ccccc, demo-workers-aaaaa, demo-workers-bbbbb"},
		{[]string{"--remove-node", "demo-workers-aaaaa"}, "--remove-node needs the size its pool shrinks to"},
		{[]string{}, "nothing to scale: set --control-plane, --workers, --pool NAME=COUNT or --autoscale POOL=MIN:MAX"},
		{[]string{"--autoscale", "gpu=2:1"}, "--autoscale: autoscale \"gpu=2:1\": the minimum (2) must be at most the maximum (1)"},
		{[]string{"--autoscale", "tpu=0:2"}, `the cluster has no worker pool "tpu"; its pools are workers, gpu`},
		{[]string{"--pool", "gpu"}, `pool "gpu" must look like NAME=COUNT`},
		{[]string{"--workers", "-1"}, "the default pool cannot have -1 nodes"},
		{[]string{"--workers", "2", "--timeout", "-1s"}, "--timeout must be positive"},
	}
	for _, tt := range tests {
		r := knest(t, "", append([]string{"scale", "demo", "-n", ns}, tt.args...)...)
		g.Expect(r.err).To(MatchError(ContainSubstring(tt.want)), "args %v", tt.args)
		g.Expect(r.stderr).To(HavePrefix("ERROR: "), "args %v", tt.args)
	}
	after := getCluster(g, t.Context(), ns, "demo")
	g.Expect(after.Spec).To(Equal(before.Spec))
	g.Expect(after.Generation).To(Equal(before.Generation))
	for _, m := range []string{"demo-workers-aaaaa", "demo-workers-bbbbb", "demo-gpu-ccccc"} {
		g.Expect(annotations(g, t, ns, m)).NotTo(HaveKey(clusterv1.DeleteMachineAnnotation), "a refused request marks nothing")
	}

	r := knest(t, "", "scale", "nope", "-n", ns, "--workers", "1")
	g.Expect(r.err).To(MatchError("cluster nope not found in namespace " + ns))
}

func TestScaleWaitsForTheNewSize(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "1").err).To(Succeed())
	setStatus(t, ns, "demo", ready)

	run := start(t, "", "scale", "demo", "-n", ns, "--workers", "3", "--timeout", "1m")
	g.Eventually(func() int32 { return *getCluster(g, t.Context(), ns, "demo").Spec.Workers[0].Replicas }, 10*time.Second).Should(Equal(int32(3)))
	// The old status (generation 1, 1/1 ready) must not count as converged.
	g.Consistently(run.done, time.Second).ShouldNot(Receive())
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		ready(nc)
		nc.Status.Workers[0].Ready = 2
		nc.Status.Phase = knestv1.PhaseScaling
		nc.Status.Conditions[0] = condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.ScalingUpReason, "2 of 3 workers ready")
	})
	g.Consistently(run.done, time.Second).ShouldNot(Receive())
	setStatus(t, ns, "demo", ready)

	r := run.wait()
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(lines(r.stderr)).To(ContainElements("✓ workers 3/3 ready", "✓ cluster demo is ready"))
	g.Expect(r.stderr).NotTo(ContainSubstring("workers 1/1 ready"))
}

func TestScaleTimeoutSaysWhatStaysAndHowToUndoIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "1", "--pool", "gpu=2").err).To(Succeed())
	setStatus(t, ns, "demo", ready)

	r := knest(t, "", "scale", "demo", "-n", ns, "--workers", "3", "--pool", "gpu=0", "--timeout", "2s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be ready")))
	g.Expect(r.err).To(MatchError(HaveSuffix("\nThe change (pool workers 1 -> 3, pool gpu 2 -> 0) stays applied and the controller keeps working on it; " +
		"to undo it: knest scale demo -n " + ns + " --pool workers=1 --pool gpu=2")))
}

// TestScaleRefusesToGrowAHeldPool: Cluster API creates no machines for a pool held
// at an older minor than the control plane (MachineSet preflight check
// KubeadmVersionSkew), so knest refuses before it changes anything, and says what to
// do; shrinking it is fine.
func TestScaleRefusesToGrowAHeldPool(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--version", "v1.34.4", "--workers", "1", "--pool", "gpu=2").err).To(Succeed())
	g.Expect(knest(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.35.4", "--hold-pool", "gpu", "--wait=false").err).To(Succeed())
	before := getCluster(g, t.Context(), ns, "demo")
	g.Expect(before.Spec.Workers[1].Version).To(Equal("v1.34.4"))

	r := knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--workers", "2", "--pool", "gpu=3")
	g.Expect(r.err).To(MatchError("cannot scale cluster demo: pool gpu is held at v1.34.4 and the control plane runs v1.35.4: " +
		"Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew), " +
		"so the pool cannot grow (nor have a failed node replaced); let it catch up first " +
		"(knest upgrade <cluster> --version v1.35.4 --release-pool gpu), then scale it"))
	g.Expect(r.stderr).To(HavePrefix("ERROR: "))
	after := getCluster(g, t.Context(), ns, "demo")
	g.Expect(after.Generation).To(Equal(before.Generation), "a refused request changes nothing, not even the other pool")

	// The API server refuses the same, for whoever bypasses the CLI.
	after.Spec.Workers[1].Replicas = ptr.To[int32](3)
	g.Expect(env.Client.Update(t.Context(), after)).To(MatchError(ContainSubstring(kubever.HeldPoolGrowMessage)))

	g.Expect(knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--pool", "gpu=1").err).To(Succeed(), "a held pool can shrink")
	g.Expect(sizes(getCluster(g, t.Context(), ns, "demo"))["gpu"]).To(Equal(int32(1)))
	g.Expect(knest(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.35.4", "--release-pool", "gpu", "--wait=false").err).To(Succeed())
	g.Expect(knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--pool", "gpu=3").err).To(Succeed(), "a released pool grows")
}

func TestScaleAutoscaledPool(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "2", "--autoscale", "gpu=0:4")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.Workers[1]).To(And(HaveField("Replicas", BeNil()), HaveField("Autoscaling", Equal(&knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 4}))),
		"the API server keeps an autoscaled pool without replicas")

	// Its size is the autoscaler's: refused, saying what to do instead.
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--pool", "gpu=3")
	g.Expect(r.err).To(MatchError(ContainSubstring("pool gpu is autoscaled (0 to 4 nodes): the autoscaler sets its size; change its bounds with --autoscale gpu=MIN:MAX, " +
		"or turn autoscaling off and size it yourself with --autoscale gpu=off --pool gpu=N")))
	g.Expect(getCluster(g, t.Context(), ns, "demo").Generation).To(Equal(nc.Generation))

	// New bounds.
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--autoscale", "gpu=1:6")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo scaling: pool gpu auto 0-4 -> auto 1-6"))
	g.Expect(getCluster(g, t.Context(), ns, "demo").Spec.Workers[1].Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 6}))

	// Off: the pool keeps the size the autoscaler last set, as the controller reports it.
	nc = getCluster(g, t.Context(), ns, "demo")
	nc.Status.Workers = []knestv1.PoolStatus{
		{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2}},
		{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 6}, ReplicaStatus: knestv1.ReplicaStatus{Desired: 3, Ready: 3, Current: 3}},
	}
	g.Expect(env.Client.Status().Update(t.Context(), nc)).To(Succeed())
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--autoscale", "gpu=off")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo scaling: pool gpu auto 1-6 -> 3"))
	nc = getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.Workers[1].Autoscaling).To(BeNil())
	g.Expect(nc.Spec.Workers[1].Replicas).To(HaveValue(BeEquivalentTo(3)))

	// The default pool, by a bare MIN:MAX, and back with a size of its own.
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--autoscale", "1:3")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stderr).To(ContainSubstring("pool workers 2 -> auto 1-3"))
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--workers", "2")
	g.Expect(r.err).To(MatchError(ContainSubstring("pool workers is autoscaled (1 to 3 nodes)")))
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--autoscale", "workers=off", "--workers", "5")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(getCluster(g, t.Context(), ns, "demo").Spec.Workers[0].Replicas).To(HaveValue(BeEquivalentTo(5)))
}
