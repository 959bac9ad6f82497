package upgrade

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

const cp = knestv1.ControlPlanePool

func machine(pool, name, version string, ready bool) Machine {
	m := Machine{Name: name, Pool: pool, Version: version}
	if ready {
		m.Node, m.Ready, m.Kubelet = name, true, version
	}
	return m
}

func deleting(m Machine) Machine {
	m.Deleting = true
	return m
}

// events is Diff's output in a form that is easy to compare.
func events(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Type)+" "+e.Machine.Name)
	}
	return out
}

func TestDiff(t *testing.T) {
	pools := []string{"workers", "gpu"}
	// Before: a control plane and two workers at v1.34.4.
	before := NewSnapshot([]Machine{
		machine(cp, "demo-cp-aaaaa", "v1.34.4", true),
		machine("workers", "demo-workers-bbbbb", "v1.34.4", true),
		machine("workers", "demo-workers-ccccc", "v1.34.4", true),
		machine("gpu", "demo-gpu-ddddd", "v1.34.4", true),
	})

	tests := []struct {
		name       string
		prev, cur  Snapshot
		want       []string
		wantSorted bool
	}{{
		name: "nothing changed",
		prev: before, cur: before,
	}, {
		name: "surge in progress: a new machine per group, not ready yet; the old ones still there",
		prev: before,
		cur: NewSnapshot([]Machine{
			machine("gpu", "demo-gpu-ddddd", "v1.34.4", true),
			machine("gpu", "demo-gpu-zzzzz", "v1.35.4", false),
			machine("workers", "demo-workers-bbbbb", "v1.34.4", true),
			machine("workers", "demo-workers-ccccc", "v1.34.4", true),
			machine("workers", "demo-workers-yyyyy", "v1.35.4", false),
			machine(cp, "demo-cp-aaaaa", "v1.34.4", true),
			machine(cp, "demo-cp-xxxxx", "v1.35.4", false),
		}),
		// The control plane first, then the pools in the order given.
		want: []string{"Created demo-cp-xxxxx", "Created demo-workers-yyyyy", "Created demo-gpu-zzzzz"},
	}, {
		name: "a surge machine becomes ready and the old one is drained",
		prev: NewSnapshot([]Machine{
			machine(cp, "demo-cp-aaaaa", "v1.34.4", true),
			machine(cp, "demo-cp-xxxxx", "v1.35.4", false),
		}),
		cur: NewSnapshot([]Machine{
			deleting(machine(cp, "demo-cp-aaaaa", "v1.34.4", true)),
			machine(cp, "demo-cp-xxxxx", "v1.35.4", true),
		}),
		want: []string{"Ready demo-cp-xxxxx", "Deleting demo-cp-aaaaa"},
	}, {
		name: "a machine is deleted",
		prev: NewSnapshot([]Machine{
			deleting(machine(cp, "demo-cp-aaaaa", "v1.34.4", true)),
			machine(cp, "demo-cp-xxxxx", "v1.35.4", true),
		}),
		cur:  NewSnapshot([]Machine{machine(cp, "demo-cp-xxxxx", "v1.35.4", true)}),
		want: []string{"Deleted demo-cp-aaaaa"},
	}, {
		name: "a machine that appears ready and deleting at once gets every step",
		prev: Snapshot{},
		cur:  NewSnapshot([]Machine{deleting(machine("workers", "demo-workers-bbbbb", "v1.34.4", true))}),
		want: []string{"Created demo-workers-bbbbb", "Ready demo-workers-bbbbb", "Deleting demo-workers-bbbbb"},
	}, {
		name: "a stale read (ready before, not now) reports nothing",
		prev: NewSnapshot([]Machine{machine("workers", "demo-workers-yyyyy", "v1.35.4", true)}),
		cur:  NewSnapshot([]Machine{machine("workers", "demo-workers-yyyyy", "v1.35.4", false)}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(events(Diff(tt.prev, tt.cur, pools))).To(Equal(tt.want))
		})
	}
}

func TestTrackerReportsEachStepOnce(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	old := machine(cp, "demo-cp-aaaaa", "v1.34.4", true)
	oldWorker := machine("workers", "demo-workers-bbbbb", "v1.34.4", true)
	tr := NewTracker(start, []Machine{old, oldWorker}, []string{"workers"})

	g.Expect(tr.Observe([]Machine{old, oldWorker}, start.Add(time.Second))).To(BeEmpty(), "what existed at the start is not news")

	surge := machine(cp, "demo-cp-xxxxx", "v1.35.4", false)
	got := tr.Observe([]Machine{old, surge, oldWorker}, start.Add(4*time.Second))
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].String()).To(Equal("control plane: new machine demo-cp-xxxxx at v1.35.4 (after 4s)"))

	ready := machine(cp, "demo-cp-xxxxx", "v1.35.4", true)
	got = tr.Observe([]Machine{deleting(old), ready, oldWorker}, start.Add(112*time.Second+400*time.Millisecond))
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].String()).To(Equal("control plane: node demo-cp-xxxxx ready at v1.35.4 (after 1m52s)"))
	g.Expect(got[1].String()).To(Equal("control plane: machine demo-cp-aaaaa (v1.34.4) is being drained and removed (after 1m52s)"))

	got = tr.Observe([]Machine{ready, oldWorker}, start.Add(150*time.Second))
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].String()).To(Equal("control plane: machine demo-cp-aaaaa (v1.34.4) removed (after 2m30s)"))

	// Stale reads: the deleted machine listed again, the new one not ready for a
	// moment, then ready again. None of it is news.
	g.Expect(tr.Observe([]Machine{deleting(old), surge, oldWorker}, start.Add(152*time.Second))).To(BeEmpty())
	g.Expect(tr.Observe([]Machine{ready, oldWorker}, start.Add(154*time.Second))).To(BeEmpty())

	nc := &knestv1.NestedCluster{Spec: knestv1.NestedClusterSpec{Version: "v1.35.4",
		Workers: []knestv1.WorkerPool{{Name: "workers"}}}}
	g.Expect(tr.Machines()).To(Equal([]Machine{ready, oldWorker}))
	g.Expect(tr.Behind(nc)).To(Equal([]Machine{oldWorker}))
	nc.Spec.Workers[0].Version = "v1.34.4"
	g.Expect(tr.Behind(nc)).To(BeEmpty(), "a held pool is where it should be")
}

func TestSort(t *testing.T) {
	g := NewWithT(t)
	ms := []Machine{
		{Name: "x-stray", Pool: "zzz"},
		{Name: "demo-gpu-b", Pool: "gpu"},
		{Name: "demo-workers-a", Pool: "workers"},
		{Name: "demo-cp-b", Pool: cp},
		{Name: "demo-gpu-a", Pool: "gpu"},
		{Name: "demo-cp-a", Pool: cp},
	}
	Sort(ms, []string{"workers", "gpu"})
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	g.Expect(names).To(Equal([]string{"demo-cp-a", "demo-cp-b", "demo-workers-a", "demo-gpu-a", "demo-gpu-b", "x-stray"}))
}

func TestMachineFrom(t *testing.T) {
	g := NewWithT(t)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-gpu-abcde-fghij", Labels: map[string]string{
			clusterv1.ClusterNameLabel: "demo", clusterv1.MachineDeploymentNameLabel: "demo-gpu", knestv1.PoolNameLabel: "gpu"}},
		Spec: clusterv1.MachineSpec{Version: "v1.35.4"},
	}
	g.Expect(MachineFrom(m, "demo")).To(Equal(Machine{Name: "demo-gpu-abcde-fghij", Pool: "gpu", Version: "v1.35.4"}))

	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "demo-gpu-abcde-fghij"}
	m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: "v1.35.4"}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionFalse}}
	g.Expect(MachineFrom(m, "demo").Ready).To(BeFalse(), "a node that joined but is not Ready")
	m.Status.Conditions[0].Status = metav1.ConditionTrue
	got := MachineFrom(m, "demo")
	g.Expect(got.Ready).To(BeTrue())
	g.Expect(got.Node).To(Equal("demo-gpu-abcde-fghij"))
	g.Expect(got.Kubelet).To(Equal("v1.35.4"))

	m.Status.NodeRef = clusterv1.MachineNodeReference{}
	g.Expect(MachineFrom(m, "demo").Ready).To(BeFalse(), "no node, not ready, whatever the conditions say")

	cpm := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "demo-cp-abcde", DeletionTimestamp: &metav1.Time{},
		Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}}}
	got = MachineFrom(cpm, "demo")
	g.Expect(got.Pool).To(Equal(cp))
	g.Expect(got.Deleting).To(BeTrue())
	g.Expect(PoolTitle(got.Pool)).To(Equal("control plane"))
	g.Expect(PoolTitle("workers")).To(Equal("workers"))
	g.Expect(PoolTitle("gpu")).To(Equal("pool gpu"))
}
