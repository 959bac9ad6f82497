package scale

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func pool(name string, n int32) knestv1.WorkerPool {
	return knestv1.WorkerPool{Name: name, Replicas: ptr.To(n)}
}

func spec(cp int32, pools ...knestv1.WorkerPool) knestv1.NestedClusterSpec {
	return knestv1.NestedClusterSpec{ControlPlane: knestv1.ControlPlaneSpec{Replicas: cp}, Workers: pools}
}

// heldSpec is a cluster at v1.35.4 with one control-plane node.
func heldSpec(pools ...knestv1.WorkerPool) knestv1.NestedClusterSpec {
	s := spec(1, pools...)
	s.Version = "v1.35.4"
	return s
}

func held(p knestv1.WorkerPool, version string) knestv1.WorkerPool {
	p.Version = version
	return p
}

func sizes(s knestv1.NestedClusterSpec) map[string]int32 {
	out := map[string]int32{knestv1.ControlPlanePool: s.ControlPlane.Replicas}
	for _, p := range s.Workers {
		out[p.Name] = p.ReplicasOrDefault()
	}
	return out
}

var machines = []Machine{
	{Name: "demo-cp-abcde", NodeName: "demo-cp-abcde", Pool: knestv1.ControlPlanePool},
	{Name: "demo-cp-fghij", NodeName: "demo-cp-fghij", Pool: knestv1.ControlPlanePool},
	{Name: "demo-cp-klmno", NodeName: "demo-cp-klmno", Pool: knestv1.ControlPlanePool},
	{Name: "demo-workers-x1", NodeName: "demo-workers-x1", Pool: "workers"},
	{Name: "demo-workers-x2", NodeName: "demo-workers-x2", Pool: "workers"},
	{Name: "demo-workers-x3", NodeName: "demo-workers-x3", Pool: "workers"},
	{Name: "demo-gpu-y1", NodeName: "node-of-y1", Pool: "gpu"},
}

func TestApply(t *testing.T) {
	tests := []struct {
		name     string
		spec     knestv1.NestedClusterSpec
		req      Request
		want     map[string]int32
		changes  []Change
		marked   []string
		errMatch string
	}{
		{
			name:     "empty request",
			spec:     spec(1, pool("workers", 2)),
			errMatch: "nothing to scale",
		},
		{
			name:    "control plane up to 3",
			spec:    spec(1, pool("workers", 2)),
			req:     Request{ControlPlane: ptr.To[int32](3)},
			want:    map[string]int32{"control-plane": 3, "workers": 2},
			changes: []Change{{Pool: "control-plane", From: 1, To: 3}},
		},
		{
			name:    "control plane down to 1",
			spec:    spec(5),
			req:     Request{ControlPlane: ptr.To[int32](1)},
			want:    map[string]int32{"control-plane": 1},
			changes: []Change{{Pool: "control-plane", From: 5, To: 1}},
		},
		{name: "control plane even", spec: spec(1), req: Request{ControlPlane: ptr.To[int32](2)}, errMatch: "cannot have 2 nodes: it needs 1, 3, 5 or 7, because an even number"},
		{name: "control plane 4", spec: spec(3), req: Request{ControlPlane: ptr.To[int32](4)}, errMatch: "tolerates no more failures than 3"},
		{name: "control plane zero", spec: spec(1), req: Request{ControlPlane: ptr.To[int32](0)}, errMatch: "cannot be scaled to 0 nodes"},
		{name: "control plane negative", spec: spec(1), req: Request{ControlPlane: ptr.To[int32](-1)}, errMatch: "cannot be scaled to -1"},
		{name: "control plane 9", spec: spec(1), req: Request{ControlPlane: ptr.To[int32](9)}, errMatch: "cannot have 9 nodes: it needs 1, 3, 5 or 7"},
		{
			name:    "workers means the pool named workers",
			spec:    spec(1, pool("gpu", 1), pool("workers", 2)),
			req:     Request{Workers: ptr.To[int32](4)},
			want:    map[string]int32{"control-plane": 1, "gpu": 1, "workers": 4},
			changes: []Change{{Pool: "workers", From: 2, To: 4}},
		},
		{
			name:    "workers means the only pool",
			spec:    spec(1, pool("general", 2)),
			req:     Request{Workers: ptr.To[int32](3)},
			want:    map[string]int32{"control-plane": 1, "general": 3},
			changes: []Change{{Pool: "general", From: 2, To: 3}},
		},
		{name: "workers ambiguous", spec: spec(1, pool("a", 1), pool("b", 1)), req: Request{Workers: ptr.To[int32](3)}, errMatch: "several worker pools (a, b) and none named workers"},
		{name: "workers without pools", spec: spec(1), req: Request{Workers: ptr.To[int32](3)}, errMatch: "no worker pools"},
		{name: "workers and the same pool by name", spec: spec(1, pool("workers", 1)), req: Request{Workers: ptr.To[int32](3), Pools: map[string]int32{"workers": 3}}, errMatch: "given twice"},
		{
			name:    "pool to zero",
			spec:    spec(1, pool("workers", 2), pool("gpu", 1)),
			req:     Request{Pools: map[string]int32{"gpu": 0}},
			want:    map[string]int32{"control-plane": 1, "workers": 2, "gpu": 0},
			changes: []Change{{Pool: "gpu", From: 1, To: 0}},
		},
		{
			name:    "pool from zero",
			spec:    spec(1, pool("workers", 2), pool("gpu", 0)),
			req:     Request{Pools: map[string]int32{"gpu": 2}},
			want:    map[string]int32{"control-plane": 1, "workers": 2, "gpu": 2},
			changes: []Change{{Pool: "gpu", From: 0, To: 2}},
		},
		{
			name: "unset pool replicas count as the default 1",
			spec: spec(1, knestv1.WorkerPool{Name: "workers"}),
			req:  Request{Workers: ptr.To[int32](1)},
			want: map[string]int32{"control-plane": 1, "workers": 1},
		},
		{
			name: "same size changes nothing",
			spec: spec(3, pool("workers", 2)),
			req:  Request{ControlPlane: ptr.To[int32](3), Workers: ptr.To[int32](2)},
			want: map[string]int32{"control-plane": 3, "workers": 2},
		},
		{
			name:    "held pool scales down",
			spec:    heldSpec(pool("workers", 2), held(pool("gpu", 2), "v1.34.4")),
			req:     Request{Pools: map[string]int32{"gpu": 1}},
			want:    map[string]int32{"control-plane": 1, "workers": 2, "gpu": 1},
			changes: []Change{{Pool: "gpu", From: 2, To: 1}},
		},
		{
			name:    "pool held at an older patch grows",
			spec:    heldSpec(held(pool("workers", 2), "v1.35.3")),
			req:     Request{Workers: ptr.To[int32](3)},
			want:    map[string]int32{"control-plane": 1, "workers": 3},
			changes: []Change{{Pool: "workers", From: 2, To: 3}},
		},
		{
			name: "held pool cannot grow", spec: heldSpec(pool("workers", 2), held(pool("gpu", 0), "v1.34.4")),
			req:      Request{Workers: ptr.To[int32](3), Pools: map[string]int32{"gpu": 1}},
			errMatch: "pool gpu is held at v1.34.4 and the control plane runs v1.35.4: Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew), so the pool cannot grow (nor have a failed node replaced); let it catch up first (knest upgrade <cluster> --version v1.35.4 --release-pool gpu), then scale it",
		},
		{name: "unknown pool lists the pools", spec: spec(1, pool("workers", 1), pool("gpu", 1)), req: Request{Pools: map[string]int32{"tpu": 1}}, errMatch: `no worker pool "tpu"; its pools are workers, gpu`},
		{name: "unknown pool without pools", spec: spec(1), req: Request{Pools: map[string]int32{"tpu": 1}}, errMatch: "its pools are (none)"},
		{name: "pool negative", spec: spec(1, pool("workers", 1)), req: Request{Pools: map[string]int32{"workers": -2}}, errMatch: "cannot have -2 nodes"},
		{name: "pool too large", spec: spec(1, pool("workers", 1)), req: Request{Workers: ptr.To[int32](201)}, errMatch: "from 0 to 200"},
		{
			name:    "remove named worker nodes",
			spec:    spec(3, pool("workers", 3), pool("gpu", 1)),
			req:     Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"demo-workers-x3", "demo-workers-x1"}},
			want:    map[string]int32{"control-plane": 3, "workers": 1, "gpu": 1},
			changes: []Change{{Pool: "workers", From: 3, To: 1}},
			marked:  []string{"demo-workers-x3", "demo-workers-x1"},
		},
		{
			name:    "remove fewer nodes than the decrease",
			spec:    spec(3, pool("workers", 3)),
			req:     Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"demo-workers-x2"}},
			want:    map[string]int32{"control-plane": 3, "workers": 1},
			changes: []Change{{Pool: "workers", From: 3, To: 1}},
			marked:  []string{"demo-workers-x2"},
		},
		{
			name:    "remove a node by its Node name",
			spec:    spec(3, pool("workers", 3), pool("gpu", 1)),
			req:     Request{Pools: map[string]int32{"gpu": 0}, RemoveNodes: []string{"node-of-y1"}},
			want:    map[string]int32{"control-plane": 3, "workers": 3, "gpu": 0},
			changes: []Change{{Pool: "gpu", From: 1, To: 0}},
			marked:  []string{"demo-gpu-y1"},
		},
		{
			name:    "remove a control-plane node",
			spec:    spec(3, pool("workers", 3)),
			req:     Request{ControlPlane: ptr.To[int32](1), RemoveNodes: []string{"demo-cp-fghij"}},
			want:    map[string]int32{"control-plane": 1, "workers": 3},
			changes: []Change{{Pool: "control-plane", From: 3, To: 1}},
			marked:  []string{"demo-cp-fghij"},
		},
		{name: "remove more nodes than the decrease", spec: spec(3, pool("workers", 3)), req: Request{Workers: ptr.To[int32](2), RemoveNodes: []string{"demo-workers-x1", "demo-workers-x2"}}, errMatch: "2 nodes of pool workers are named for removal but it shrinks by only 1"},
		{name: "remove a node of a pool not scaled", spec: spec(3, pool("workers", 3), pool("gpu", 1)), req: Request{Workers: ptr.To[int32](2), RemoveNodes: []string{"demo-gpu-y1"}}, errMatch: "node demo-gpu-y1 belongs to pool gpu, which this request does not scale down"},
		{name: "remove a node of a pool scaled up", spec: spec(3, pool("workers", 3)), req: Request{Workers: ptr.To[int32](4), RemoveNodes: []string{"demo-workers-x1"}}, errMatch: "does not scale down"},
		{name: "remove a node without a scale", spec: spec(3, pool("workers", 3)), req: Request{RemoveNodes: []string{"demo-workers-x1"}}, errMatch: "does not scale down"},
		{name: "remove an unknown node", spec: spec(3, pool("workers", 3)), req: Request{Workers: ptr.To[int32](2), RemoveNodes: []string{"nope"}}, errMatch: "node nope is not a node of this cluster; its nodes are demo-cp-abcde"},
		{name: "remove a node twice", spec: spec(3, pool("workers", 3)), req: Request{Workers: ptr.To[int32](1), RemoveNodes: []string{"demo-workers-x1", "demo-workers-x1"}}, errMatch: "named twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := tt.spec.DeepCopy()
			plan, err := Apply(tt.spec, tt.req, machines)
			g.Expect(tt.spec).To(Equal(*before), "Apply must not modify its input")
			if tt.errMatch != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.errMatch)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sizes(plan.Spec)).To(Equal(tt.want))
			g.Expect(plan.Changes).To(Equal(tt.changes))
			g.Expect(plan.MarkForDeletion).To(Equal(tt.marked))
		})
	}
}

func TestParsePoolSizes(t *testing.T) {
	tests := []struct {
		in       []string
		want     map[string]int32
		errMatch string
	}{
		{in: nil, want: map[string]int32{}},
		{in: []string{"gpu=2", "cpu=0"}, want: map[string]int32{"gpu": 2, "cpu": 0}},
		{in: []string{"gpu"}, errMatch: "must look like NAME=COUNT"},
		{in: []string{"=2"}, errMatch: "must look like NAME=COUNT"},
		{in: []string{"gpu="}, errMatch: "must look like NAME=COUNT"},
		{in: []string{"gpu=two"}, errMatch: `the count "two" is not a whole number`},
		{in: []string{"gpu=-1"}, errMatch: "from 0 to 200"},
		{in: []string{"gpu=201"}, errMatch: "from 0 to 200"},
		{in: []string{"GPU=1"}, errMatch: "must be a DNS label"},
		{in: []string{"a-very-long-pool-name=1"}, errMatch: "at most 15 characters"},
		{in: []string{"gpu=1", "gpu=2"}, errMatch: "given twice"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		got, err := ParsePoolSizes(tt.in)
		if tt.errMatch != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tt.errMatch)), "input %v", tt.in)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(tt.want))
	}
}

func TestMachineFrom(t *testing.T) {
	m := func(labels map[string]string) *clusterv1.Machine {
		mm := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: labels}}
		mm.Status.NodeRef.Name = "n"
		return mm
	}
	g := NewWithT(t)
	g.Expect(MachineFrom(m(map[string]string{knestv1.PoolNameLabel: "gpu"}), "demo")).To(Equal(Machine{Name: "m", NodeName: "n", Pool: "gpu"}))
	g.Expect(MachineFrom(m(map[string]string{clusterv1.MachineControlPlaneLabel: ""}), "demo").Pool).To(Equal(knestv1.ControlPlanePool))
	g.Expect(MachineFrom(m(map[string]string{clusterv1.MachineDeploymentNameLabel: "demo-workers"}), "demo").Pool).To(Equal("workers"))
}

func readyCluster() *knestv1.NestedCluster {
	return &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Generation: 2},
		Spec:       spec(3, pool("workers", 2), pool("gpu", 0)),
		Status: knestv1.NestedClusterStatus{
			ObservedGeneration: 2,
			ControlPlane:       knestv1.ReplicaStatus{Desired: 3, Ready: 3},
			Workers:            []knestv1.PoolStatus{{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2, Ready: 2}}},
			Conditions: []metav1.Condition{
				{Type: knestv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReadyReason},
				{Type: knestv1.WorkersReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReadyReason},
			},
		},
	}
}

func TestConverged(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(nc *knestv1.NestedCluster)
		pending string
	}{
		{name: "converged", mutate: func(*knestv1.NestedCluster) {}},
		{name: "old generation", mutate: func(nc *knestv1.NestedCluster) { nc.Generation = 3 }, pending: "not yet observed generation 3"},
		{name: "control plane not ready", mutate: func(nc *knestv1.NestedCluster) { nc.Status.ControlPlane.Ready = 2 }, pending: "control plane 2/3 ready"},
		{name: "control plane desired behind spec", mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 5 }, pending: "control plane 3/5 ready"},
		{name: "pool not ready", mutate: func(nc *knestv1.NestedCluster) { nc.Status.Workers[0].Ready = 1 }, pending: "pool workers 1/2 ready"},
		{name: "pool missing from status", mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[1].Replicas = ptr.To[int32](1) }, pending: "pool gpu 0/1 ready"},
		{name: "pool scaled down not yet", mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To[int32](1) }, pending: "pool workers 2/1 ready"},
		{name: "removed machine still draining", mutate: func(nc *knestv1.NestedCluster) {
			// The machine being removed is no longer Ready, so ready already equals desired.
			nc.Spec.Workers[0].Replicas = ptr.To[int32](1)
			nc.Status.Workers[0].ReplicaStatus = knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 2}
		}, pending: "pool workers: 1 of 2 machines still being removed"},
		{name: "control plane machine still being removed", mutate: func(nc *knestv1.NestedCluster) { nc.Status.ControlPlane.Current = 4 }, pending: "control plane: 1 of 4 machines"},
		{name: "ready false", mutate: func(nc *knestv1.NestedCluster) { nc.Status.Conditions[0].Status = metav1.ConditionFalse }, pending: "condition Ready is not True"},
		{name: "no conditions", mutate: func(nc *knestv1.NestedCluster) { nc.Status.Conditions = nil }, pending: "condition Ready is not True"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := readyCluster()
			tt.mutate(nc)
			if tt.pending == "" {
				g.Expect(Converged(nc)).To(BeTrue(), "pending: %v", Pending(nc))
				return
			}
			g.Expect(Converged(nc)).To(BeFalse())
			g.Expect(Pending(nc)).To(ContainElement(ContainSubstring(tt.pending)))
		})
	}
}

func TestBlocking(t *testing.T) {
	g := NewWithT(t)
	nc := readyCluster()
	g.Expect(Blocking(nc)).To(BeNil())

	nc.Status.Conditions[0].Status = metav1.ConditionFalse
	g.Expect(Blocking(nc).Type).To(Equal(knestv1.ReadyCondition), "Ready is the only one left")

	nc.Status.Conditions[1] = metav1.Condition{Type: knestv1.WorkersReadyCondition, Status: metav1.ConditionFalse, Reason: knestv1.NodesNotReadyReason}
	g.Expect(Blocking(nc).Type).To(Equal(knestv1.WorkersReadyCondition), "a specific condition explains more than the summary")

	// The cause comes first whatever order the conditions are stored in: a failed
	// apply explains more than the machines that wait for it.
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: knestv1.TopologyReconciledCondition,
		Status: metav1.ConditionFalse, Reason: knestv1.ApplyFailedReason, Message: "failed to apply Cluster demo: forbidden"})
	g.Expect(Blocking(nc).Reason).To(Equal(knestv1.ApplyFailedReason))
}
