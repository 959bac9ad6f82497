// Package vmtemplate builds the KubeVirt VirtualMachine template CAPK stamps out for
// every node of a pool: virtio disk and NIC, containerDisk or DataVolume root disk,
// optional direct kernel boot, CPU and memory requested from the host scheduler,
// external eviction (CAPK drains the node first), anti-affinity across host nodes
// and, on workers, readiness while the tenant's kube-proxy serves.
package vmtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/placement"
)

// Names of the root disk inside the VM. CAPK prefixes DataVolume names with the
// machine name, so the fixed name is unique per VM.
const (
	RootDiskName   = "rootdisk"
	PodNetworkName = "default"
)

// Input is one pool's (or the control plane's) VM shape, already defaulted.
type Input struct {
	ClusterName string
	Pool        string
	Machine     knestv1.MachineSpec
	// Image is the resolved node image reference.
	Image       string
	GPUs        []knestv1.DeviceSpec
	HostDevices []knestv1.DeviceSpec
	// CPUAllocationRatio overcommits host CPU as KubeVirt's setting of that name does:
	// a VM requests cores/ratio of a host core per vCPU. 0 or 1 requests whole cores.
	CPUAllocationRatio int
	// EtcdDisk, for control-plane VMs, is a volume of the host for etcd's data (nil:
	// etcd stays on the root disk).
	EtcdDisk *EtcdDisk
	// Nameserver is the VM's only DNS server (netpol.GuestDNS); empty: its pod's,
	// the host's cluster DNS.
	Nameserver string
}

// Build returns the VirtualMachine template for a KubevirtMachineTemplate.
func Build(in Input) capkv1.VirtualMachineTemplateSpec {
	labels := map[string]string{
		knestv1.ClusterNameLabel: in.ClusterName,
		knestv1.PoolNameLabel:    in.Pool,
	}
	memory := resource.MustParse(knestv1.DefaultMemory)
	if in.Machine.Memory != nil {
		memory = *in.Machine.Memory
	}
	cores := uint32(max(in.Machine.CPU, 1))

	spec := kubevirtv1.VirtualMachineInstanceSpec{
		Domain: kubevirtv1.DomainSpec{
			CPU:    &kubevirtv1.CPU{Cores: cores},
			Memory: &kubevirtv1.Memory{Guest: &memory},
			// Requests make the host scheduler account for the whole VM (or the share
			// the platform overcommits); without them KubeVirt requests a tenth of a
			// core per vCPU whatever the platform wants.
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    cpuRequest(cores, in.CPUAllocationRatio),
				corev1.ResourceMemory: memory,
			}},
			Devices: kubevirtv1.Devices{
				Disks: []kubevirtv1.Disk{{
					Name:       RootDiskName,
					DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
				}},
				// Bridge binding gives the guest the pod IP itself: kubeadm advertises it
				// and etcd peers reach it. Masquerade would give every guest 10.0.2.2.
				Interfaces: []kubevirtv1.Interface{{
					Name:                   PodNetworkName,
					Model:                  "virtio",
					InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
				}},
				GPUs:        gpus(in.GPUs),
				HostDevices: hostDevices(in.HostDevices),
			},
		},
		Networks: []kubevirtv1.Network{{
			Name:          PodNetworkName,
			NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}},
		}},
		// External: the host's eviction (node maintenance) is handed to CAPK, which
		// drains the tenant node through Cluster API before the VM goes.
		EvictionStrategy: ptr(kubevirtv1.EvictionStrategyExternal),
		Affinity:         placement.SpreadAcrossHosts(labels),
	}
	if in.Pool != knestv1.ControlPlanePool {
		spec.ReadinessProbe = workerReadiness()
	}
	if in.Nameserver != "" {
		// What the guest's DHCP hands out: no search path of the host's namespaces.
		spec.DNSPolicy = corev1.DNSNone
		spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{in.Nameserver}}
	}

	var dataVolumes []kubevirtv1.DataVolumeTemplateSpec
	switch in.Machine.RootDisk.Type {
	case knestv1.RootDiskDataVolume:
		spec.Volumes = []kubevirtv1.Volume{{
			Name:         RootDiskName,
			VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: RootDiskName}},
		}}
		dataVolumes = []kubevirtv1.DataVolumeTemplateSpec{dataVolume(in.Image, in.Machine.RootDisk)}
	default:
		spec.Volumes = []kubevirtv1.Volume{{
			Name:         RootDiskName,
			VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: in.Image}},
		}}
	}

	if kb := in.Machine.KernelBoot; kb != nil {
		spec.Domain.Firmware = &kubevirtv1.Firmware{KernelBoot: &kubevirtv1.KernelBoot{
			KernelArgs: kb.KernelArgs,
			Container: &kubevirtv1.KernelBootContainer{
				Image:      kb.Image,
				KernelPath: kb.KernelPath,
				InitrdPath: kb.InitrdPath,
			},
		}}
	}

	vm := capkv1.VirtualMachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy:         ptr(kubevirtv1.RunStrategyAlways),
			DataVolumeTemplates: dataVolumes,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}
	if in.EtcdDisk != nil {
		in.EtcdDisk.request(&vm)
	}
	return vm
}

func dataVolume(image string, disk knestv1.RootDiskSpec) kubevirtv1.DataVolumeTemplateSpec {
	storage := &cdiv1.StorageSpec{}
	if disk.Size != nil {
		storage.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *disk.Size}
	}
	if disk.StorageClassName != "" {
		storage.StorageClassName = ptr(disk.StorageClassName)
	}
	url := "docker://" + image
	return kubevirtv1.DataVolumeTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Name: RootDiskName},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}},
			Storage: storage,
		},
	}
}

func gpus(in []knestv1.DeviceSpec) []kubevirtv1.GPU {
	var out []kubevirtv1.GPU
	for _, d := range in {
		out = append(out, kubevirtv1.GPU{Name: d.Name, DeviceName: d.DeviceName})
	}
	return out
}

func hostDevices(in []knestv1.DeviceSpec) []kubevirtv1.HostDevice {
	var out []kubevirtv1.HostDevice
	for _, d := range in {
		out = append(out, kubevirtv1.HostDevice{Name: d.Name, DeviceName: d.DeviceName})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// cpuRequest is cores/ratio host cores, in millicores (at least 1m).
func cpuRequest(cores uint32, ratio int) resource.Quantity {
	if ratio <= 1 {
		return *resource.NewQuantity(int64(cores), resource.DecimalSI)
	}
	return *resource.NewMilliQuantity(max(int64(cores)*1000/int64(ratio), 1), resource.DecimalSI)
}

// KubeProxyHealthzPort is where the tenant's kube-proxy answers /healthz on every
// address of its node (kubeadm's default).
const KubeProxyHealthzPort = 10256

// workerReadiness makes a worker's launcher pod Ready only while the tenant's
// kube-proxy on it answers /healthz: the host Services of the tenant's LoadBalancer
// Services, which pick worker launcher pods, then send nothing to a worker that is
// still booting after a restart on another host node, or whose node is being removed
// (kube-proxy fails /healthz then, KEP-3836). The kubelet probes from the VM's own
// host node, which NetworkPolicy enforcers admit. Not on control-plane VMs: their
// API Service must reach the first one while kubeadm init runs, before kube-proxy.
func workerReadiness() *kubevirtv1.Probe {
	return &kubevirtv1.Probe{
		Handler: kubevirtv1.Handler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(KubeProxyHealthzPort),
		}},
		// An emulated guest under load answers slowly; a minute of failures before
		// a running worker leaves its Services.
		PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 12,
	}
}
