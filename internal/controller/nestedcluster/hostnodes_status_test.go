package nestedcluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// What KubeVirt reports of the tenant's VMIs reaches the NestedCluster's status
// through the controller's watch: two workers on one host node, then one moved;
// VMs that cannot live-migrate. Another tenant's VMI on the same node counts for
// nothing.
func TestStatusSaysWhereTheVMsRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "placed")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	waitForGraph(g, nc)

	run := func(cluster, name, node string, notMigratable string) *kubevirtv1.VirtualMachineInstance {
		migratable := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
		if notMigratable != "" {
			migratable.Status, migratable.Reason, migratable.Message = corev1.ConditionFalse, notMigratable, "cannot migrate VMI which does not use masquerade"
		}
		return runningVMI(g, ns, cluster, name, node, migratable)
	}
	w1 := run("placed", "placed-w1", "host-a", kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable)
	run("placed", "placed-w2", "host-a", kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable)
	run("other", "other-w1", "host-b", "")
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.GetReason(nc, knestv1.HostSpreadCondition)).To(Equal(knestv1.SharedHostNodeReason))
		g.Expect(conditions.GetMessage(nc, knestv1.HostSpreadCondition)).To(HaveSuffix("pool workers: placed-w1, placed-w2 on host node host-a"))
		g.Expect(conditions.GetReason(nc, knestv1.LiveMigratableCondition)).To(Equal(knestv1.NotLiveMigratableReason))
		g.Expect(conditions.GetMessage(nc, knestv1.LiveMigratableCondition)).To(HavePrefix(
			"KubeVirt cannot live-migrate pool workers: 2 of 2 VMs (InterfaceNotLiveMigratable: cannot migrate VMI which does not use masquerade)"))
	}, timeout, interval).Should(Succeed())

	// KubeVirt restarts w1 on host-b, where only another tenant's VM runs.
	env.SetVMIStatus(g, w1, func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.NodeName = "host-b" })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.IsTrue(nc, knestv1.HostSpreadCondition)).To(BeTrue(), conditions.GetMessage(nc, knestv1.HostSpreadCondition))
	}, timeout, interval).Should(Succeed())
	g.Expect(conditions.IsTrue(nc, knestv1.ReadyCondition)).To(BeFalse(), "Cluster API has reported nothing")
	g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).NotTo(ContainSubstring("host node"), "neither condition decides Ready")
}

// A VM whose host node stops being ready, or whose node is gone, is named in
// condition HostNodesReady with the step that frees it; when the node is ready
// again (KubeVirt's Ready of the VMI back up), the condition is True.
func TestStatusNamesVMsOnLostHostNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "lost")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	waitForGraph(g, nc)

	// Host nodes as their kubelets report them; names of this test's own.
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}}
		g.Expect(env.Client.Create(ctx, n)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		setNodeReady(g, n, ready)
		return n
	}
	up, down := node("up", corev1.ConditionTrue), node("down", corev1.ConditionUnknown)
	run := func(name, host string, ready corev1.ConditionStatus) *kubevirtv1.VirtualMachineInstance {
		return runningVMI(g, ns, "lost", name, host, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: ready})
	}
	run("lost-w1", up.Name, corev1.ConditionTrue)
	w2 := run("lost-w2", down.Name, corev1.ConditionFalse)
	run("lost-w3", ns+"-gone", corev1.ConditionFalse)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.GetReason(nc, knestv1.HostNodesReadyCondition)).To(Equal(knestv1.HostNodeNotReadyReason))
		msg := conditions.GetMessage(nc, knestv1.HostNodesReadyCondition)
		g.Expect(msg).To(HavePrefix("lost-w2 (pool workers) on host node " + down.Name + ", which is not ready (Ready Unknown since "))
		g.Expect(msg).To(ContainSubstring("; lost-w3 (pool workers) on host node " + ns + "-gone, which is gone. "))
		g.Expect(msg).To(ContainSubstring("delete the Node object or taint it node.kubernetes.io/out-of-service"))
		g.Expect(msg).NotTo(ContainSubstring("lost-w1"))
	}, timeout, interval).Should(Succeed())

	// down is back, and the VMI on the gone node went with it (KubeVirt cleans up
	// once the Node object is deleted).
	setNodeReady(g, down, corev1.ConditionTrue)
	g.Expect(env.Client.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lost-w3"}})).To(Succeed())
	env.SetVMIStatus(g, w2, func(s *kubevirtv1.VirtualMachineInstanceStatus) {
		s.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.IsTrue(nc, knestv1.HostNodesReadyCondition)).To(BeTrue(), conditions.GetMessage(nc, knestv1.HostNodesReadyCondition))
	}, timeout, interval).Should(Succeed())
	g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).NotTo(ContainSubstring("host node"), "not part of Ready")
}

// A VM that no host node can take (KubeVirt's copy of its launcher pod's
// PodScheduled condition) is named, with the scheduler's words, in its pool's
// condition and so in Ready: a 2-core host left a worker's VM pending for want of
// CPU while the cluster said only "workers 1/2". Once placed, it is not named.
func TestStatusNamesVMsNoHostNodeCanTake(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "full")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	scheduling := func(pool, name string) *kubevirtv1.VirtualMachineInstance {
		vmi := newVMI(g, ns, "full", pool, name)
		env.SetVMIStatus(g, vmi, func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.Phase = kubevirtv1.Scheduling })
		return vmi
	}
	scheduled := func(status corev1.ConditionStatus, reason, message string) func(*kubevirtv1.VirtualMachineInstanceStatus) {
		return func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
				Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: status, Reason: reason, Message: message}}
		}
	}
	w2, cp := scheduling("workers", "full-w2"), scheduling(knestv1.ControlPlanePool, "full-cp")
	// Only the condition changes, as when the scheduler first gives up on the pod.
	full := scheduled(corev1.ConditionFalse, corev1.PodReasonUnschedulable, "0/1 nodes are available: 1 Insufficient cpu. ")
	env.SetVMIStatus(g, w2, full)
	env.SetVMIStatus(g, cp, full)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.GetMessage(nc, knestv1.WorkersReadyCondition)).To(HaveSuffix(
			" (no host node can take VM full-w2: 0/1 nodes are available: 1 Insufficient cpu.)"))
		g.Expect(conditions.GetMessage(nc, knestv1.ControlPlaneReadyCondition)).To(HaveSuffix(
			"; no host node can take VM full-cp: 0/1 nodes are available: 1 Insufficient cpu."))
	}, timeout, interval).Should(Succeed())
	// With the control plane up and no worker, Ready says why.
	simulateClusterAPI(g, graph, 0)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(ContainSubstring("(no host node can take VM full-w2: "))
	}, timeout, interval).Should(Succeed())

	// CPU freed: the scheduler places both and KubeVirt runs them.
	for _, vmi := range []*kubevirtv1.VirtualMachineInstance{w2, cp} {
		env.SetVMIStatus(g, vmi, scheduled(corev1.ConditionTrue, "", ""))
	}
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		for _, c := range []string{knestv1.WorkersReadyCondition, knestv1.ControlPlaneReadyCondition, knestv1.ReadyCondition} {
			g.Expect(conditions.GetMessage(nc, c)).NotTo(ContainSubstring("no host node"), c)
		}
	}, timeout, interval).Should(Succeed())
}

// setNodeReady writes a host node's Ready condition, as its kubelet or the node
// lifecycle controller would.
func setNodeReady(g Gomega, n *corev1.Node, ready corev1.ConditionStatus) {
	env.Get(g, n)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(context.Background(), n)).To(Succeed())
}

// newVMI creates a VMI of cluster's pool (knestv1.ControlPlanePool for the control
// plane) as CAPK makes it from knest's VM template, without status.
func newVMI(g Gomega, ns, cluster, pool, name string) *kubevirtv1.VirtualMachineInstance {
	tmpl := vmtemplate.Build(vmtemplate.Input{ClusterName: cluster, Pool: pool, Image: "knest.local/node:test"}).Spec.Template
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.ObjectMeta.Labels}, Spec: tmpl.Spec}
	g.Expect(env.Client.Create(context.Background(), vmi)).To(Succeed())
	return vmi
}

// runningVMI creates a worker VMI of cluster and writes its status as virt-handler
// does: Running on node, with conditions.
func runningVMI(g Gomega, ns, cluster, name, node string, conditions ...kubevirtv1.VirtualMachineInstanceCondition) *kubevirtv1.VirtualMachineInstance {
	vmi := newVMI(g, ns, cluster, "workers", name)
	env.SetVMIStatus(g, vmi, func(s *kubevirtv1.VirtualMachineInstanceStatus) {
		s.Phase, s.NodeName, s.Conditions = kubevirtv1.Running, node, conditions
	})
	return vmi
}
