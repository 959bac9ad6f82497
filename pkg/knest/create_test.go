package knest_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
)

// demoCluster is the NestedCluster Create is given: only what a user sets; the API
// server defaults the rest.
func demoCluster(ns string, pools ...knestv1.WorkerPool) *knestv1.NestedCluster {
	return &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}, Spec: knestv1.NestedClusterSpec{Workers: pools}}
}

// createInBackground runs Create with a wait and returns where its error arrives,
// once the NestedCluster is stored.
func createInBackground(t *testing.T, c *knest.Client, nc *knestv1.NestedCluster, timeout time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Create(t.Context(), nc, knest.CreateWithWait(timeout)) }()
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(t.Context(), client.ObjectKeyFromObject(nc), &knestv1.NestedCluster{})
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	return done
}

func TestCreateRefusesAClusterThatExists(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, out := newClient(t)
	g.Expect(c.Create(t.Context(), demoCluster(ns, pool("workers", 1)))).To(Succeed())
	g.Expect(knesttest.Lines(out.String())).To(ContainElement("✓ cluster demo created in namespace " + ns))

	err := c.Create(t.Context(), demoCluster(ns, pool("workers", 2)))
	g.Expect(err).To(MatchError("cluster demo already exists in namespace " + ns + "; scale or delete it, or pick another name"))
	g.Expect(*getCluster(g, t.Context(), client.ObjectKey{Namespace: ns, Name: "demo"}).Spec.Workers[0].Replicas).To(Equal(int32(1)), "the first stays as it was")
}

func TestCreateWaitsUntilReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, out := newClient(t)
	nc := demoCluster(ns, pool("workers", 2))
	key := client.ObjectKeyFromObject(nc)
	done := createInBackground(t, c, nc, time.Minute)

	// The controller's steps: provisioning, endpoint, control plane, workers, ready.
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseProvisioning
		nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: 1}
		nc.Status.Conditions = []metav1.Condition{knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.WaitingForInfraReason, "waiting for the API endpoint")}
	})
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.Endpoint = "https://10.96.0.20:6443"
	})
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: 1, Ready: 1}
		nc.Status.Workers = []knestv1.PoolStatus{{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2}}}
	})
	g.Consistently(done, time.Second).ShouldNot(Receive(), "not ready while workers are missing")
	setStatus(t, key, knesttest.Ready)

	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(knesttest.Lines(out.String())).To(ContainElements(
		"✓ cluster demo created in namespace "+ns,
		"✓ endpoint https://10.96.0.20:6443",
		"✓ control plane 1/1 ready",
		"✓ workers 2/2 ready",
		"✓ cluster demo is ready",
	))
	g.Expect(out.String()).To(MatchRegexp(`(?s)created.*endpoint https://10.96.0.20:6443.*control plane 1/1 ready.*workers 2/2 ready.*cluster demo is ready`))
}

func TestCreateTimesOutNamingTheBlockingCondition(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, out := newClient(t)
	nc := demoCluster(ns, pool("workers", 1))
	key := client.ObjectKeyFromObject(nc)
	done := createInBackground(t, c, nc, 3*time.Second)
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseProvisioning
		nc.Status.Conditions = []metav1.Condition{
			knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.WaitingForControlPlaneReason, "the control plane is not ready"),
			knesttest.Condition(knestv1.InfrastructureReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
			knesttest.Condition(knestv1.ControlPlaneReadyCondition, metav1.ConditionFalse, knestv1.WaitingForInfraReason, "VM demo-cp-x7k2p is not running: ErrImagePull"),
		}
	})

	var err error
	g.Eventually(done, 10*time.Second).Should(Receive(&err), "the timeout ends the wait")
	g.Expect(err).To(MatchError(
		"timed out after 3s waiting for cluster demo to be ready: condition ControlPlaneReady is False, reason WaitingForInfrastructure: " +
			"VM demo-cp-x7k2p is not running: ErrImagePull; waiting for control plane 0/1 ready, pool workers 0/1 ready, condition Ready is not True; phase Provisioning\n" +
			"NestedCluster demo stays in namespace " + ns + " and the controller keeps working on it: follow it with `knest get demo -n " + ns + "`, " +
			"or remove it and everything built for it with `knest delete demo -n " + ns + "`"))
	g.Expect(out.String()).To(ContainSubstring("✗ cluster demo is not ready after 3s"))
}

func TestCreateFailsWhenPhaseFailed(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c, _ := newClient(t)
	nc := demoCluster(ns, pool("workers", 1))
	done := createInBackground(t, c, nc, time.Minute)
	setStatus(t, client.ObjectKeyFromObject(nc), func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseFailed
		nc.Status.Conditions = []metav1.Condition{
			knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.ClusterFailedReason, "kubeadm init failed on demo-cp-x7k2p"),
		}
	})

	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("cluster demo failed: condition Ready is False, reason ClusterFailed: kubeadm init failed on demo-cp-x7k2p")))
}
