package app_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func TestCreateWithoutWait(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	r := knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "2", "--pool", "gpu=0")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty(), "progress goes to stderr")
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo created in namespace " + ns))
	g.Expect(r.stderr).To(ContainSubstring("knest get demo -n " + ns))

	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.Workers).To(HaveLen(2))
	g.Expect(*nc.Spec.Workers[0].Replicas).To(Equal(int32(2)))
	g.Expect(*nc.Spec.Workers[1].Replicas).To(Equal(int32(0)))

	// What --dry-run prints is what the API server stores (its defaults included).
	dry := knest(t, "", "create", "demo", "-n", ns, "--dry-run", "--workers", "2", "--pool", "gpu=0")
	g.Expect(dry.err).NotTo(HaveOccurred())
	fromDryRun := &knestv1.NestedCluster{}
	g.Expect(yaml.UnmarshalStrict([]byte(dry.stdout), fromDryRun)).To(Succeed())
	g.Expect(fromDryRun.Spec).To(Equal(nc.Spec))

	again := knest(t, "", "create", "demo", "-n", ns, "--wait=false")
	g.Expect(again.err).To(MatchError(ContainSubstring("cluster demo already exists in namespace " + ns)))
}

func TestCreateFromManifestOnStdin(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	manifest := "apiVersion: knest.dev/v1alpha1\nkind: NestedCluster\nmetadata:\n  name: fromfile\nspec:\n  controlPlane:\n    replicas: 3\n  workers:\n  - name: big\n    replicas: 4\n    memory: 16Gi\n"
	r := knest(t, manifest, "create", "-f", "-", "-n", ns, "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	nc := getCluster(g, t.Context(), ns, "fromfile")
	g.Expect(nc.Spec.ControlPlane.Replicas).To(Equal(int32(3)))
	g.Expect(nc.Spec.Workers[0].Memory.String()).To(Equal("16Gi"))
	g.Expect(nc.Spec.Workers[0].CPU).To(Equal(int32(2)), "defaulted by the API server")
}

func TestCreateWaitsUntilReady(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	run := start(t, "", "create", "demo", "-n", ns, "--workers", "2", "--timeout", "1m")
	eventuallyCluster(t, ns, "demo")

	// The controller's steps: provisioning, endpoint, control plane, workers, ready.
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseProvisioning
		nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: 1}
		nc.Status.Conditions = []metav1.Condition{condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.WaitingForInfraReason, "waiting for the API endpoint")}
	})
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		nc.Status.Endpoint = "https://10.96.0.20:6443"
	})
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: 1, Ready: 1}
		nc.Status.Workers = []knestv1.PoolStatus{{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2}}}
	})
	g.Consistently(run.done, time.Second).ShouldNot(Receive(), "not ready while workers are missing")
	setStatus(t, ns, "demo", ready)

	r := run.wait()
	t.Logf("stderr:\n%s", r.stderr)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty())
	g.Expect(lines(r.stderr)).To(ContainElements(
		"✓ cluster demo created in namespace "+ns,
		"✓ endpoint https://10.96.0.20:6443",
		"✓ control plane 1/1 ready",
		"✓ workers 2/2 ready",
		"✓ cluster demo is ready",
	))
	g.Expect(r.stderr).To(MatchRegexp(`(?s)created.*endpoint https://10.96.0.20:6443.*control plane 1/1 ready.*workers 2/2 ready.*cluster demo is ready`))
	g.Expect(r.stderr).To(ContainSubstring("knest kubeconfig demo -n " + ns))
}

func TestCreateTimesOutNamingTheBlockingCondition(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	run := start(t, "", "create", "demo", "-n", ns, "--timeout", "3s")
	eventuallyCluster(t, ns, "demo")
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseProvisioning
		nc.Status.Conditions = []metav1.Condition{
			condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.WaitingForControlPlaneReason, "the control plane is not ready"),
			condition(knestv1.InfrastructureReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
			condition(knestv1.ControlPlaneReadyCondition, metav1.ConditionFalse, knestv1.WaitingForInfraReason, "VM demo-cp-x7k2p is not running: ErrImagePull"),
		}
	})
	started := time.Now()
	r := run.wait()
	t.Logf("stderr:\n%s", r.stderr)
	g.Expect(time.Since(started)).To(BeNumerically("<", 10*time.Second))
	g.Expect(r.err).To(MatchError(
		"timed out after 3s waiting for cluster demo to be ready: condition ControlPlaneReady is False, reason WaitingForInfrastructure: " +
			"VM demo-cp-x7k2p is not running: ErrImagePull; waiting for control plane 0/1 ready, pool workers 0/1 ready, condition Ready is not True; phase Provisioning\n" +
			"NestedCluster demo stays in namespace " + ns + " and the controller keeps working on it: follow it with `knest get demo -n " + ns + "`, " +
			"or remove it and everything built for it with `knest delete demo -n " + ns + "`"))
	g.Expect(r.stderr).To(ContainSubstring("✗ cluster demo is not ready after 3s"))
	g.Expect(r.stderr).To(ContainSubstring("\nERROR: timed out after 3s"))
}

func TestCreateTimesOutWithoutController(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := knest(t, "", "create", "demo", "-n", ns, "--timeout", "2s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be ready: the knest controller has not reported any status for it; is the controller running on the host cluster?")))
}

func TestCreateFailsWhenPhaseFailed(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	run := start(t, "", "create", "demo", "-n", ns, "--timeout", "1m")
	eventuallyCluster(t, ns, "demo")
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		nc.Status.ObservedGeneration = nc.Generation
		nc.Status.Phase = knestv1.PhaseFailed
		nc.Status.Conditions = []metav1.Condition{
			condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.ClusterFailedReason, "kubeadm init failed on demo-cp-x7k2p"),
		}
	})
	r := run.wait()
	g.Expect(r.err).To(MatchError(ContainSubstring("cluster demo failed: condition Ready is False, reason ClusterFailed: kubeadm init failed on demo-cp-x7k2p")))
}
