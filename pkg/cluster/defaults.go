package cluster

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Default fills in what the API server's CRD defaults fill in, so a NestedCluster
// rendered without an API server (knest create --dry-run) matches one that went
// through it. The integration tests compare the two. A pool's replicas are not
// defaulted (an autoscaled pool has none): WorkerPool.ReplicasOrDefault reads unset
// as 1.
func Default(nc *knestv1.NestedCluster) {
	s := &nc.Spec
	setIfEmpty(&s.Version, knestv1.DefaultVersion)
	if s.ControlPlane.Replicas == 0 {
		s.ControlPlane.Replicas = 1
	}
	setIfEmpty(&s.ControlPlane.Mode, knestv1.ControlPlaneVM)
	defaultMachine(&s.ControlPlane.MachineSpec)
	for i := range s.Workers {
		p := &s.Workers[i]
		defaultMachine(&p.MachineSpec)
	}
	setIfEmpty(&s.Network.PodCIDR, knestv1.DefaultPodCIDR)
	setIfEmpty(&s.Network.ServiceCIDR, knestv1.DefaultServiceCIDR)
	setIfEmpty(&s.Network.DNSDomain, knestv1.DefaultDNSDomain)
	setIfEmpty(&s.Network.CNI, knestv1.CNIFlannel)
	setIfEmpty(&s.APIServer.ServiceType, knestv1.ServiceTypeClusterIP)
	if s.Backup.Interval == nil {
		s.Backup.Interval = &metav1.Duration{Duration: knestv1.DefaultBackupInterval}
	}
	if s.Backup.Keep == 0 {
		s.Backup.Keep = knestv1.DefaultBackupKeep
	}
}

func defaultMachine(m *knestv1.MachineSpec) {
	if m.CPU == 0 {
		m.CPU = knestv1.DefaultCPU
	}
	if m.Memory == nil {
		m.Memory = ptr(resource.MustParse(knestv1.DefaultMemory))
	}
	setIfEmpty(&m.RootDisk.Type, knestv1.RootDiskContainerDisk)
	if m.NodeDrainTimeoutSeconds == nil {
		m.NodeDrainTimeoutSeconds = ptr(int32(knestv1.DefaultDrainTimeoutSeconds))
	}
	if m.KernelBoot != nil {
		defaultKernelBoot(m.KernelBoot)
	}
}

func defaultKernelBoot(kb *knestv1.KernelBootSpec) {
	setIfEmpty(&kb.KernelPath, "/boot/vmlinuz")
	setIfEmpty(&kb.InitrdPath, "/boot/initrd.img")
	setIfEmpty(&kb.KernelArgs, knestv1.DefaultKernelArgs)
}

func setIfEmpty[T ~string](field *T, value T) {
	if *field == "" {
		*field = value
	}
}

func ptr[T any](v T) *T { return &v }
