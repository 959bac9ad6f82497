package vmtemplate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
)

// A control-plane VM keeps etcd's data on a claim of its own, so that a VM that
// KubeVirt restarts (its qemu killed, its host node rebooted) comes back with the
// tenant's objects although its root disk is a fresh copy of the container disk.
//
// CAPK stamps every machine's VM out of one template and names nothing per machine
// but DataVolumes (which need CDI), so the claim cannot be in the template. The
// template asks for it instead: the VM is created Halted with the annotations
// below, and knest's etcd-disk controller makes the claim `<vm>-etcd` (owned by the
// VM, so it goes with it), attaches it (AttachEtcdDisk) and starts the VM. CAPK
// copies the template's runStrategy once and never writes the VM spec again.
const (
	// EtcdDiskSizeAnnotation on a VM asks for an etcd disk of that size.
	EtcdDiskSizeAnnotation = "knest.dev/etcd-disk-size"
	// EtcdDiskClassAnnotation names its StorageClass; absent: the host's default.
	EtcdDiskClassAnnotation = "knest.dev/etcd-disk-storage-class"
	// EtcdDiskName is the disk's and volume's name, and its serial: the guest finds
	// it as /dev/disk/by-id/virtio-etcd.
	EtcdDiskName = "etcd"
	// EtcdDiskDevice is where the guest finds it.
	EtcdDiskDevice = "/dev/disk/by-id/virtio-" + EtcdDiskName
)

// EtcdDisk is the etcd volume a control-plane VM asks for.
type EtcdDisk struct {
	Size             resource.Quantity
	StorageClassName string
}

func (d *EtcdDisk) request(vm *capkv1.VirtualMachineTemplateSpec) {
	vm.Spec.RunStrategy = ptr(kubevirtv1.RunStrategyHalted)
	vm.ObjectMeta.Annotations = map[string]string{EtcdDiskSizeAnnotation: d.Size.String()}
	if d.StorageClassName != "" {
		vm.ObjectMeta.Annotations[EtcdDiskClassAnnotation] = d.StorageClassName
	}
}

// EtcdDiskClaimName is the claim of a VM's etcd disk.
func EtcdDiskClaimName(vm string) string { return vm + "-etcd" }

// WantsEtcdDisk tells a VM whose etcd disk is still to be attached.
func WantsEtcdDisk(vm *kubevirtv1.VirtualMachine) bool {
	_, ok := vm.Annotations[EtcdDiskSizeAnnotation]
	return ok && !HasEtcdDisk(vm)
}

// HasEtcdDisk tells a VM with its etcd disk attached.
func HasEtcdDisk(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.Template == nil {
		return false
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == EtcdDiskName {
			return true
		}
	}
	return false
}

// EtcdDiskClaim is the claim a VM's annotations ask for, owned by the VM.
func EtcdDiskClaim(vm *kubevirtv1.VirtualMachine) (*corev1.PersistentVolumeClaim, error) {
	size, err := resource.ParseQuantity(vm.Annotations[EtcdDiskSizeAnnotation])
	if err != nil {
		return nil, fmt.Errorf("annotation %s of VM %s: %w", EtcdDiskSizeAnnotation, vm.Name, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: EtcdDiskClaimName(vm.Name), Namespace: vm.Namespace, Labels: vm.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if c, ok := vm.Annotations[EtcdDiskClassAnnotation]; ok {
		pvc.Spec.StorageClassName = &c
	}
	return pvc, nil
}

// AttachEtcdDisk adds the claim to the VM as a virtio disk with serial etcd and
// starts it.
func AttachEtcdDisk(vm *kubevirtv1.VirtualMachine) {
	t := &vm.Spec.Template.Spec
	t.Domain.Devices.Disks = append(t.Domain.Devices.Disks, kubevirtv1.Disk{
		Name: EtcdDiskName, Serial: EtcdDiskName,
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
	})
	t.Volumes = append(t.Volumes, kubevirtv1.Volume{Name: EtcdDiskName, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: EtcdDiskClaimName(vm.Name)},
		},
	}})
	vm.Spec.RunStrategy = ptr(kubevirtv1.RunStrategyAlways)
}
