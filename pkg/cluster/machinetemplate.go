package cluster

import (
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// machineTemplate is the KubevirtMachineTemplate of control-plane or worker nodes,
// named by its content (hashedName).
func (r renderer) machineTemplate(pool, base, version string, m knestv1.MachineSpec, gpus, hostDevices []knestv1.DeviceSpec, etcdDisk *vmtemplate.EtcdDisk) (*capkv1.KubevirtMachineTemplate, error) {
	spec := capkv1.KubevirtMachineTemplateSpec{Template: capkv1.KubevirtMachineTemplateResource{Spec: capkv1.KubevirtMachineSpec{
		VirtualMachineTemplate: vmtemplate.Build(vmtemplate.Input{
			ClusterName: r.name,
			Pool:        pool,
			Machine:     r.withKernelBoot(m, version),
			Image:       r.image(m, version),
			GPUs:        gpus,
			HostDevices: hostDevices,
			EtcdDisk:    etcdDisk,

			CPUAllocationRatio: r.opts.CPUAllocationRatio,
			Nameserver:         r.nameserver(),
		}),
		BootstrapCheckSpec: capkv1.VirtualMachineBootstrapCheckSpec{CheckStrategy: r.bootstrapCheck()},
	}}}
	name, err := hashedName(base, spec)
	if err != nil {
		return nil, err
	}
	return &capkv1.KubevirtMachineTemplate{
		TypeMeta:   typeMeta(capkv1.GroupVersion.WithKind("KubevirtMachineTemplate")),
		ObjectMeta: r.meta(name, pool),
		Spec:       spec,
	}, nil
}

// bootstrapCheck is the controller's strategy, except for the workers of a hosted
// control plane: CAPK makes no SSH keys for an externally managed KubevirtCluster.
func (r renderer) bootstrapCheck() string {
	if r.nc.Spec.ControlPlane.IsHosted() {
		return BootstrapCheckNone
	}
	return r.opts.BootstrapCheck
}

// withKernelBoot gives a machine on the default node image the kernel-boot image
// that goes with it.
func (r renderer) withKernelBoot(m knestv1.MachineSpec, version string) knestv1.MachineSpec {
	if m.Image != "" || m.KernelBoot != nil || r.opts.NodeKernelRepository == NoKernelBoot {
		return m
	}
	m.KernelBoot = &knestv1.KernelBootSpec{Image: r.opts.NodeKernelRepository + ":" + version}
	defaultKernelBoot(m.KernelBoot)
	return m
}

func (r renderer) image(m knestv1.MachineSpec, version string) string {
	if m.Image != "" {
		return m.Image
	}
	return r.opts.NodeImageRepository + ":" + version
}
