package knest_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
)

// What Wait decides from one read of the cluster; the fake client serves it.
func TestWaitDecidesFromStatus(t *testing.T) {
	failed := func(nc *knestv1.NestedCluster) {
		nc.Status.Phase = knestv1.PhaseFailed
		nc.Status.Conditions = []metav1.Condition{knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.ClusterFailedReason, "kubeadm init failed")}
	}
	tests := []struct {
		name   string
		mutate func(*knestv1.NestedCluster)
		want   string // "" is ready
	}{
		{"ready", knesttest.Ready, ""},
		{"no status yet", func(*knestv1.NestedCluster) {}, "timed out after 2s waiting for cluster demo to be ready: the knest controller has not reported any status for it"},
		{"ready, but for an older generation", func(nc *knestv1.NestedCluster) { knesttest.Ready(nc); nc.Status.ObservedGeneration = nc.Generation - 1 }, "timed out after 2s"},
		{"failed", func(nc *knestv1.NestedCluster) { knesttest.Ready(nc); failed(nc) }, "cluster demo failed: condition Ready is False, reason ClusterFailed: kubeadm init failed"},
		{"failed, for an older generation", func(nc *knestv1.NestedCluster) {
			knesttest.Ready(nc)
			failed(nc)
			nc.Status.ObservedGeneration = nc.Generation - 1
		}, "timed out after 2s"},
		{"paused", func(nc *knestv1.NestedCluster) { knesttest.Ready(nc); nc.Spec.Paused = true }, "cluster demo is paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", Generation: 2},
				Spec: knestv1.NestedClusterSpec{ControlPlane: knestv1.ControlPlaneSpec{Replicas: 1},
					Workers: []knestv1.WorkerPool{pool("workers", 1)}}}
			tt.mutate(nc)
			out := &knesttest.SyncBuffer{}
			c := knest.NewClient(fake.NewClientBuilder().WithScheme(knest.Scheme()).WithObjects(nc).Build(),
				knest.WithLogger(cli.NewLogger(out, 0).Logr()), knest.WithPollInterval(100*time.Millisecond))

			err := c.Wait(t.Context(), client.ObjectKeyFromObject(nc), knest.WaitWithTimeout(2*time.Second))
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out.String()).To(ContainSubstring("✓ cluster demo is ready"))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestWaitForDeletionEndsWhenTheClusterIsGone(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", Finalizers: []string{knestv1.Finalizer},
		DeletionTimestamp: ptr.To(metav1.Now())}}
	kube := fake.NewClientBuilder().WithScheme(knest.Scheme()).WithObjects(nc).Build()
	c := knest.NewClient(kube, knest.WithPollInterval(100*time.Millisecond))
	key := client.ObjectKeyFromObject(nc)

	err := c.WaitForDeletion(t.Context(), key, knest.WaitWithTimeout(time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("timed out after 1s waiting for cluster demo to be deleted: finalizers " + knestv1.Finalizer + " remain")))

	g.Expect(kube.Get(t.Context(), key, nc)).To(Succeed())
	nc.Finalizers = nil
	g.Expect(kube.Update(t.Context(), nc)).To(Succeed())
	g.Expect(c.WaitForDeletion(t.Context(), key, knest.WaitWithTimeout(time.Second))).To(Succeed())
}

// Without a terminal (CI, a script) the wait prints what it waits for each time that
// changes, once: the log says where a slow create stands.
func TestWaitPrintsWhatItWaitsForWithoutATerminal(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", Generation: 1},
		Spec: knestv1.NestedClusterSpec{ControlPlane: knestv1.ControlPlaneSpec{Replicas: 1},
			Workers: []knestv1.WorkerPool{pool("workers", 1)}},
		Status: knestv1.NestedClusterStatus{ObservedGeneration: 1, Phase: knestv1.PhaseProvisioning,
			ControlPlane: knestv1.ReplicaStatus{Desired: 1}}}
	out := &knesttest.SyncBuffer{}
	c := knest.NewClient(fake.NewClientBuilder().WithScheme(knest.Scheme()).WithObjects(nc).Build(),
		knest.WithLogger(cli.NewLogger(out, 0).Logr()), knest.WithPollInterval(100*time.Millisecond))

	err := c.Wait(t.Context(), client.ObjectKeyFromObject(nc), knest.WaitWithTimeout(time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("timed out after 1s")))
	g.Expect(out.String()).To(Equal(" • Waiting for cluster demo to be ready (timeout 1s) ...\n"+
		" • Waiting for cluster demo (Provisioning): control plane 0/1 ready ...\n"+
		" ✗ cluster demo is not ready after 1s\n"), "the blocking part once, though the cluster was read every 100ms")
}
