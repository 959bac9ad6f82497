package nestedcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/event"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// vmi is a VMI of the pool on the given host node as virt-handler reports it; migratable
// is its LiveMigratable condition's reason, "" for True, "-" for none yet.
func vmi(name, pool, node string, phase kubevirtv1.VirtualMachineInstancePhase, migratable string) kubevirtv1.VirtualMachineInstance {
	v := kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{knestv1.ClusterNameLabel: "t", knestv1.PoolNameLabel: pool}}}
	v.Status.Phase, v.Status.NodeName = phase, node
	switch migratable {
	case "-":
	case "":
		v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}
	default:
		v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
			Reason: migratable, Message: "cannot migrate VMI which does not use masquerade to connect to the pod network or bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation"}}
	}
	return v
}

func TestHostSpreadCondition(t *testing.T) {
	g := NewWithT(t)
	cp := knestv1.ControlPlanePool
	deleting := vmi("w3", "workers", "host-a", kubevirtv1.Running, "-")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())

	nc := &knestv1.NestedCluster{}
	setHostSpreadCondition(nc, nil)
	g.Expect(conditions.Get(nc, knestv1.HostSpreadCondition)).To(BeNil(), "no VM runs yet")

	// One of each pool per node; a VM still scheduling, and one going away, on a
	// node already taken do not count.
	spread := []kubevirtv1.VirtualMachineInstance{
		vmi("cp1", cp, "host-a", kubevirtv1.Running, "-"), vmi("cp2", cp, "host-b", kubevirtv1.Running, "-"),
		vmi("w1", "workers", "host-a", kubevirtv1.Running, "-"), vmi("w2", "workers", "host-b", kubevirtv1.Running, "-"),
		vmi("w4", "workers", "host-b", kubevirtv1.Scheduling, "-"), deleting,
	}
	setHostSpreadCondition(nc, spread)
	g.Expect(conditions.IsTrue(nc, knestv1.HostSpreadCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(nc, knestv1.HostSpreadCondition)).To(Equal(knestv1.SpreadReason))

	// A host drain put both workers, and two of three control-plane VMs, on host-b.
	together := []kubevirtv1.VirtualMachineInstance{
		vmi("cp1", cp, "host-b", kubevirtv1.Running, "-"), vmi("cp2", cp, "host-b", kubevirtv1.Running, "-"), vmi("cp3", cp, "host-c", kubevirtv1.Running, "-"),
		vmi("w2", "workers", "host-b", kubevirtv1.Running, "-"), vmi("w1", "workers", "host-b", kubevirtv1.Running, "-"),
		vmi("g1", "gpu", "host-a", kubevirtv1.Running, "-"),
	}
	setHostSpreadCondition(nc, together)
	g.Expect(conditions.IsFalse(nc, knestv1.HostSpreadCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(nc, knestv1.HostSpreadCondition)).To(Equal(knestv1.SharedHostNodeReason))
	g.Expect(conditions.GetMessage(nc, knestv1.HostSpreadCondition)).To(HaveSuffix(
		": control plane: cp1, cp2 on host node host-b; pool workers: w1, w2 on host node host-b"))

	setHostSpreadCondition(nc, nil)
	g.Expect(conditions.Get(nc, knestv1.HostSpreadCondition)).To(BeNil(), "the tenant's VMs are gone")
}

func TestLiveMigratableCondition(t *testing.T) {
	g := NewWithT(t)
	cp := knestv1.ControlPlanePool
	nc := &knestv1.NestedCluster{}

	setLiveMigratableCondition(nc, []kubevirtv1.VirtualMachineInstance{vmi("w1", "workers", "host-a", kubevirtv1.Running, "-")})
	g.Expect(conditions.Get(nc, knestv1.LiveMigratableCondition)).To(BeNil(), "KubeVirt has not said yet")

	setLiveMigratableCondition(nc, []kubevirtv1.VirtualMachineInstance{
		vmi("cp1", cp, "host-a", kubevirtv1.Running, ""), vmi("w1", "workers", "host-b", kubevirtv1.Running, ""),
		vmi("w2", "workers", "host-b", kubevirtv1.Running, "-"),
	})
	g.Expect(conditions.IsTrue(nc, knestv1.LiveMigratableCondition)).To(BeTrue())

	// The kind host's bridge binding on the pod network; one GPU VM of two.
	setLiveMigratableCondition(nc, []kubevirtv1.VirtualMachineInstance{
		vmi("cp1", cp, "host-a", kubevirtv1.Running, ""),
		vmi("w1", "workers", "host-a", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable),
		vmi("w2", "workers", "host-b", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable),
		vmi("g1", "gpu", "host-a", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReasonHostDeviceNotMigratable),
		vmi("g2", "gpu", "host-b", kubevirtv1.Running, ""),
	})
	g.Expect(conditions.IsFalse(nc, knestv1.LiveMigratableCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(nc, knestv1.LiveMigratableCondition)).To(Equal(knestv1.NotLiveMigratableReason))
	msg := conditions.GetMessage(nc, knestv1.LiveMigratableCondition)
	g.Expect(msg).To(HavePrefix("KubeVirt cannot live-migrate pool gpu: 1 of 2 VMs (HostDeviceNotLiveMigratable: cannot migrate"))
	g.Expect(msg).To(ContainSubstring("; pool workers: 2 of 2 VMs (InterfaceNotLiveMigratable: cannot migrate"))
	g.Expect(msg).NotTo(ContainSubstring("control plane"))
}

// Only what the conditions read lets a VMI's update through: a guest agent's
// report does not.
func TestVMPlacementChanged(t *testing.T) {
	g := NewWithT(t)
	old := vmi("w1", "workers", "host-a", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable)
	changed := func(mutate func(*kubevirtv1.VirtualMachineInstance)) bool {
		n := old.DeepCopy()
		mutate(n)
		return vmPlacementChanged.Update(event.UpdateEvent{ObjectOld: &old, ObjectNew: n})
	}
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.Status.GuestOSInfo.Name = "Debian" })).To(BeFalse())
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.Status.NodeName = "host-b" })).To(BeTrue())
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.Status.Phase = kubevirtv1.Failed })).To(BeTrue())
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.DeletionTimestamp = ptr.To(metav1.Now()) })).To(BeTrue())
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.Status.Conditions[0].Status = corev1.ConditionTrue })).To(BeTrue())
	g.Expect(changed(func(v *kubevirtv1.VirtualMachineInstance) { v.Status.Conditions = nil })).To(BeTrue())
}
