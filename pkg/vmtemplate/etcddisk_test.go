package vmtemplate

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// What CAPK makes of the template: the VM spec and metadata, named after the machine.
func vmFrom(in Input) *kubevirtv1.VirtualMachine {
	t := Build(in)
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-cp-x1", Namespace: "team-a", Labels: t.ObjectMeta.Labels, Annotations: t.ObjectMeta.Annotations, UID: "u1"},
		Spec:       *t.Spec.DeepCopy(),
	}
}

func TestEtcdDisk(t *testing.T) {
	g := NewWithT(t)
	in := Input{ClusterName: "demo", Pool: knestv1.ControlPlanePool, Image: "knest/node:v1.35.4"}

	// Without one: nothing asked, the VM runs at once.
	vm := vmFrom(in)
	g.Expect(WantsEtcdDisk(vm)).To(BeFalse())
	g.Expect(*vm.Spec.RunStrategy).To(Equal(kubevirtv1.RunStrategyAlways))

	in.EtcdDisk = &EtcdDisk{Size: resource.MustParse("4Gi"), StorageClassName: "fast"}
	vm = vmFrom(in)
	g.Expect(*vm.Spec.RunStrategy).To(Equal(kubevirtv1.RunStrategyHalted), "not started before its disk is there")
	g.Expect(WantsEtcdDisk(vm)).To(BeTrue())
	pvc, err := EtcdDiskClaim(vm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pvc.Name).To(Equal("demo-cp-x1-etcd"))
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("4Gi"))
	g.Expect(*pvc.Spec.StorageClassName).To(Equal("fast"))
	g.Expect(metav1.IsControlledBy(pvc, vm)).To(BeTrue())

	AttachEtcdDisk(vm)
	g.Expect(*vm.Spec.RunStrategy).To(Equal(kubevirtv1.RunStrategyAlways))
	g.Expect(WantsEtcdDisk(vm)).To(BeFalse(), "attached once")
	g.Expect(HasEtcdDisk(vm)).To(BeTrue())
	g.Expect(vm.Spec.Template.Spec.Domain.Devices.Disks).To(ContainElement(And(HaveField("Name", "etcd"), HaveField("Serial", "etcd"),
		HaveField("DiskDevice.Disk.Bus", kubevirtv1.DiskBusVirtio))))
	g.Expect(vm.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", "demo-cp-x1-etcd")))
	// The root disk stays the first disk: the kernel's root= names it by label anyway.
	g.Expect(vm.Spec.Template.Spec.Domain.Devices.Disks[0].Name).To(Equal(RootDiskName))

	vm.Annotations[EtcdDiskSizeAnnotation] = "lots"
	_, err = EtcdDiskClaim(vm)
	g.Expect(err).To(MatchError(ContainSubstring(EtcdDiskSizeAnnotation)))
}
