package vmtemplate

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func TestBuild(t *testing.T) {
	memory := resource.MustParse("3Gi")
	tests := []struct {
		name  string
		in    Input
		check func(g Gomega, vm kubevirtv1.VirtualMachineSpec)
	}{
		{
			name: "containerDisk node requests its whole size from the host",
			in:   Input{ClusterName: "demo", Pool: "workers", Image: "knest/node:v1.34.3", Machine: knestv1.MachineSpec{CPU: 3, Memory: &memory}},
			check: func(g Gomega, vm kubevirtv1.VirtualMachineSpec) {
				spec := vm.Template.Spec
				g.Expect(*vm.RunStrategy).To(Equal(kubevirtv1.RunStrategyAlways))
				g.Expect(vm.DataVolumeTemplates).To(BeEmpty())
				g.Expect(spec.Volumes).To(HaveLen(1))
				g.Expect(spec.Volumes[0].ContainerDisk.Image).To(Equal("knest/node:v1.34.3"))
				g.Expect(spec.Domain.Devices.Disks[0].Disk.Bus).To(Equal(kubevirtv1.DiskBusVirtio))
				g.Expect(spec.Domain.Devices.Interfaces[0].Bridge).NotTo(BeNil(), "the guest must own the pod IP")
				g.Expect(spec.Networks[0].Pod).NotTo(BeNil())
				g.Expect(spec.Domain.CPU.Cores).To(BeEquivalentTo(3))
				g.Expect(spec.Domain.Resources.Requests.Cpu().Value()).To(BeEquivalentTo(3))
				g.Expect(spec.Domain.Resources.Requests.Memory().String()).To(Equal("3Gi"))
				g.Expect(*spec.EvictionStrategy).To(Equal(kubevirtv1.EvictionStrategyExternal))
				term := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
				g.Expect(term.LabelSelector.MatchLabels).To(Equal(map[string]string{knestv1.ClusterNameLabel: "demo", knestv1.PoolNameLabel: "workers"}))
				g.Expect(vm.Template.ObjectMeta.Labels).To(Equal(term.LabelSelector.MatchLabels), "the VMI (and so its pod) carries the labels the anti-affinity selects")
				g.Expect(spec.Domain.Firmware).To(BeNil())
			},
		},
		{
			name: "a worker is ready while its kube-proxy serves; a control-plane VM has no probe",
			in:   Input{ClusterName: "demo", Pool: "workers", Image: "knest/node:v1.35.4"},
			check: func(g Gomega, vm kubevirtv1.VirtualMachineSpec) {
				probe := vm.Template.Spec.ReadinessProbe
				g.Expect(probe).NotTo(BeNil())
				g.Expect(probe.HTTPGet.Path).To(Equal("/healthz"))
				g.Expect(probe.HTTPGet.Port.IntValue()).To(Equal(KubeProxyHealthzPort))
				g.Expect(probe.PeriodSeconds*probe.FailureThreshold).To(BeNumerically(">=", 60), "a slow guest stays in its Services for a minute")
				cp := Build(Input{ClusterName: "demo", Pool: knestv1.ControlPlanePool, Image: "knest/node:v1.35.4"})
				g.Expect(cp.Spec.Template.Spec.ReadinessProbe).To(BeNil(), "kubeadm init reaches the first control plane through its Service before kube-proxy runs")
			},
		},
		{
			name: "CPU overcommit requests a share of a host core per vCPU",
			in:   Input{ClusterName: "demo", Pool: "workers", Image: "knest/node:v1.34.3", Machine: knestv1.MachineSpec{CPU: 2}, CPUAllocationRatio: 4},
			check: func(g Gomega, vm kubevirtv1.VirtualMachineSpec) {
				spec := vm.Template.Spec
				g.Expect(spec.Domain.CPU.Cores).To(BeEquivalentTo(2), "the guest keeps its vCPUs")
				g.Expect(spec.Domain.Resources.Requests.Cpu().String()).To(Equal("500m"))
			},
		},
		{
			name: "DataVolume root disk and kernel boot",
			in: Input{ClusterName: "demo", Pool: "cp", Image: "reg/node:v1", Machine: knestv1.MachineSpec{
				RootDisk:   knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: resource.NewQuantity(10<<30, resource.BinarySI)},
				KernelBoot: &knestv1.KernelBootSpec{Image: "reg/kernel:v1", KernelPath: "/k", InitrdPath: "/i", KernelArgs: "console=ttyS0"},
			}},
			check: func(g Gomega, vm kubevirtv1.VirtualMachineSpec) {
				g.Expect(vm.DataVolumeTemplates).To(HaveLen(1))
				g.Expect(vm.DataVolumeTemplates[0].Name).To(Equal(RootDiskName))
				g.Expect(*vm.DataVolumeTemplates[0].Spec.Source.Registry.URL).To(Equal("docker://reg/node:v1"))
				g.Expect(vm.DataVolumeTemplates[0].Spec.Storage.StorageClassName).To(BeNil(), "empty means the host's default class")
				g.Expect(vm.Template.Spec.Volumes[0].DataVolume.Name).To(Equal(RootDiskName))
				kb := vm.Template.Spec.Domain.Firmware.KernelBoot
				g.Expect(kb.KernelArgs).To(Equal("console=ttyS0"))
				g.Expect(*kb.Container).To(Equal(kubevirtv1.KernelBootContainer{Image: "reg/kernel:v1", KernelPath: "/k", InitrdPath: "/i"}))
			},
		},
		{
			name: "passthrough devices",
			in: Input{ClusterName: "demo", Pool: "gpu", Image: "i",
				GPUs:        []knestv1.DeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/A10"}},
				HostDevices: []knestv1.DeviceSpec{{Name: "nic0", DeviceName: "intel.com/e810"}}},
			check: func(g Gomega, vm kubevirtv1.VirtualMachineSpec) {
				devices := vm.Template.Spec.Domain.Devices
				g.Expect(devices.GPUs).To(Equal([]kubevirtv1.GPU{{Name: "gpu0", DeviceName: "nvidia.com/A10"}}))
				g.Expect(devices.HostDevices).To(Equal([]kubevirtv1.HostDevice{{Name: "nic0", DeviceName: "intel.com/e810"}}))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out := Build(tt.in)
			g.Expect(out.ObjectMeta.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "demo"))
			tt.check(g, out.Spec)
		})
	}
}
