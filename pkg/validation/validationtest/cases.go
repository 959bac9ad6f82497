// Package validationtest holds NestedCluster validation cases shared by the unit tests
// of pkg/validation and the integration tests that run them against the API server.
package validationtest

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/kubever"
)

// Valid returns a valid NestedCluster the cases start from.
func Valid() *knestv1.NestedCluster {
	return &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a"},
		Spec: knestv1.NestedClusterSpec{
			Workers: []knestv1.WorkerPool{{Name: "workers", Replicas: ptr.To[int32](2)}},
		},
	}
}

func qty(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// resources are a container's CPU and memory requests and limits; "" leaves one out.
func resources(cpu, memory, cpuLimit, memoryLimit string) corev1.ResourceRequirements {
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] != "" {
				l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
			}
		}
		if len(l) == 0 {
			return nil
		}
		return l
	}
	return corev1.ResourceRequirements{
		Requests: list(string(corev1.ResourceCPU), cpu, string(corev1.ResourceMemory), memory),
		Limits:   list(string(corev1.ResourceCPU), cpuLimit, string(corev1.ResourceMemory), memoryLimit),
	}
}

// Case is one validation case.
type Case struct {
	Name   string
	Mutate func(*knestv1.NestedCluster)
	// Field and Message are fragments of the expected error; empty for valid cases.
	Field, Message string
	// Shared: the API server's error carries the same Message (the CRD rule and
	// pkg/validation say the same thing).
	Shared bool
	// NotOnServer says why the CRD cannot refuse this case (the CLI does, and
	// what the controller renders from it fails to apply with the reason).
	NotOnServer string
}

// Cases are valid and invalid NestedClusters with the error each invalid one gets.
// pkg/validation tests them against its rules, and the CLI's integration tests
// against the API server, so the two stay in step.
var Cases = []Case{
	{Name: "minimal", Mutate: func(*knestv1.NestedCluster) {}},
	{Name: "everything set", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.30.14"
		nc.Spec.ControlPlane = knestv1.ControlPlaneSpec{Replicas: 7, MachineSpec: knestv1.MachineSpec{CPU: 4, Memory: qty("1700Mi")}}
		nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To[int32](0),
			MachineSpec: knestv1.MachineSpec{CPU: 128, Memory: qty("1Gi"), RootDisk: knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi")}},
			GPUs:        []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}}})
		nc.Spec.Network = knestv1.NetworkSpec{PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", DNSDomain: "team-a.internal", CNI: knestv1.CNINone}
		nc.Spec.APIServer = knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, Host: "api.example.com", CertSANs: []string{"10.0.0.1"}}
	}},
	{Name: "hosted control plane", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Replicas = 3
		nc.Spec.ControlPlane.Etcd = knestv1.EtcdSpec{StorageClassName: "standard", Size: qty("8Gi")}
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	}},
	{Name: "hosted control plane of 5", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Replicas = 5
	}, Field: "spec.controlPlane", Message: "a hosted control plane has 1 or 3 API server replicas", Shared: true},
	{Name: "hosted settings on a VM control plane", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{}
	}, Field: "spec.controlPlane", Message: "controlPlane.hosted needs controlPlane.mode Hosted", Shared: true},
	{Name: "hosted control plane with a VM's shape", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Memory = qty("8Gi")
	}, Field: "spec.controlPlane", Message: "a hosted control plane has none", Shared: true},
	{Name: "hosted control plane with a root disk", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi")}
	}, Field: "spec.controlPlane", Message: "a hosted control plane has none", Shared: true},
	{Name: "hosted control plane with a node image", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Image = "quay.io/example/node:v1.35.4"
	}, Field: "spec.controlPlane", Message: "a hosted control plane has none", Shared: true},
	{Name: "hosted control plane with the default shape", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.CPU = knestv1.DefaultCPU
		nc.Spec.ControlPlane.Memory = qty(knestv1.DefaultMemory)
	}},
	{Name: "hosted memory limit below its request", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}
	}, Field: "spec.controlPlane.hosted", Message: "limits.memory must be at least its request", Shared: true},
	{Name: "hosted limits above requests", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	}},
	{Name: "hosted components sized", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			ControllerManager:  knestv1.HostedComponentSpec{Resources: resources("100m", "128Mi", "", "512Mi")},
			Scheduler:          knestv1.HostedComponentSpec{Resources: resources("", "64Mi", "", "")},
			KonnectivityServer: knestv1.HostedComponentSpec{Resources: resources("", "", "", "256Mi")},
			Etcd:               knestv1.HostedComponentSpec{Resources: resources("200m", "1Gi", "1", "1Gi")},
		}
	}},
	{Name: "controller-manager memory limit below its request", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			ControllerManager: knestv1.HostedComponentSpec{Resources: resources("", "512Mi", "", "256Mi")}}
	}, Field: "spec.controlPlane.hosted.controllerManager", Message: "controlPlane.hosted.controllerManager.resources.limits.memory must be at least its request", Shared: true},
	{Name: "scheduler CPU limit below its request", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			Scheduler: knestv1.HostedComponentSpec{Resources: resources("200m", "", "100m", "")}}
	}, Field: "spec.controlPlane.hosted.scheduler", Message: "controlPlane.hosted.scheduler.resources.limits.cpu must be at least its request", Shared: true},
	{Name: "konnectivity server memory limit below its request", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			KonnectivityServer: knestv1.HostedComponentSpec{Resources: resources("", "64Mi", "", "32Mi")}}
	}, Field: "spec.controlPlane.hosted.konnectivityServer", Message: "controlPlane.hosted.konnectivityServer.resources.limits.memory must be at least its request", Shared: true},
	{Name: "etcd memory limit below its request", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			Etcd: knestv1.HostedComponentSpec{Resources: resources("", "1Gi", "", "512Mi")}}
	}, Field: "spec.controlPlane.hosted.etcd", Message: "controlPlane.hosted.etcd.resources.limits.memory must be at least its request", Shared: true},
	{Name: "etcd resources on a VM control plane", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
			Etcd: knestv1.HostedComponentSpec{Resources: resources("", "256Mi", "", "")}}
	}, Field: "spec.controlPlane.hosted", Message: "controlPlane.hosted needs controlPlane.mode Hosted", Shared: true},
	{Name: "etcd class not a name", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Etcd.StorageClassName = "Fast_SSD" },
		Field: "spec.controlPlane.etcd.storageClassName", Message: "must be a storage class name", Shared: true},
	{Name: "etcd ephemeral", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Etcd.Ephemeral = true }},
	{Name: "etcd ephemeral with a class", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Etcd = knestv1.EtcdSpec{Ephemeral: true, StorageClassName: "standard"}
	}, Field: "spec.controlPlane.etcd", Message: "ephemeral keeps etcd off any volume", Shared: true},
	{Name: "hosted etcd of three members", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Etcd.Members = 3
	}},
	{Name: "hosted etcd of two members", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Etcd.Members = 2
	}, Field: "spec.controlPlane.etcd.members", Message: "controlPlane.etcd.members must be 1 or 3", Shared: true},
	{Name: "etcd members on a VM control plane", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Etcd.Members = 3 },
		Field: "spec.controlPlane", Message: "controlPlane.etcd.members needs controlPlane.mode Hosted", Shared: true},
	{Name: "ephemeral etcd of three members", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
		nc.Spec.ControlPlane.Etcd = knestv1.EtcdSpec{Ephemeral: true, Members: 3}
	}, Field: "spec.controlPlane.etcd", Message: "controlPlane.etcd.ephemeral has one member", Shared: true},
	{Name: "etcd volume too small", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Etcd.Size = qty("512Mi") },
		Field: "spec.controlPlane.etcd.size", Message: "from 1Gi to 64Gi", Shared: true},
	{Name: "unknown control-plane mode", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Mode = "Pods"
	}, Field: "spec.controlPlane.mode", Message: "Unsupported value"},
	{Name: "name of 30 characters", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = strings.Repeat("a", 30) }},
	{Name: "name of 31 characters", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = strings.Repeat("a", 31) }, Field: "metadata.name", Message: "must have at most 30"},
	{Name: "name with upper case", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "Demo" }, Field: "metadata.name", Message: "DNS label"},
	{Name: "name starting with a digit", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "1demo" }, Field: "metadata.name", Message: "starting with a letter"},
	{Name: "name ending with a dash", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "demo-" }, Field: "metadata.name", Message: "DNS label"},
	{Name: "version without v", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "1.35.4" }, Field: "spec.version", Message: "v1.MINOR.PATCH"},
	{Name: "version too old", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.29.0" }, Field: "spec.version", Message: "from 30 to 36", Shared: true},
	{Name: "version too new", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.37.0" }, Field: "spec.version", Message: "from 30 to 36", Shared: true},
	{Name: "pool held one minor back", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.35.4"; nc.Spec.Workers[0].Version = "v1.34.4" }},
	{Name: "pool held three minors back", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.35.4"; nc.Spec.Workers[0].Version = "v1.32.0" }},
	{Name: "pool held four minors back", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.35.4"; nc.Spec.Workers[0].Version = "v1.31.9" }, Field: "spec.workers[0].version", Message: kubever.PoolSkewMessage, Shared: true},
	{Name: "pool newer than the control plane", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.34.4"; nc.Spec.Workers[0].Version = "v1.34.5" }, Field: "spec.workers[0].version", Message: kubever.PoolSkewMessage, Shared: true},
	{Name: "pool version out of range", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Version = "v1.29.9" }, Field: "spec.workers[0].version", Message: "from 30 to 36", Shared: true},
	// The storage provider's classes.
	{Name: "storage classes", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Providers.Storage.Classes = []knestv1.TenantStorageClass{{Name: "fast", HostStorageClassName: "ssd", Default: true}, {Name: "slow.disks"}}
	}},
	{Name: "storage off", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Providers.Storage.Disabled = true }},
	{Name: "two default storage classes", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Providers.Storage.Classes = []knestv1.TenantStorageClass{{Name: "a", Default: true}, {Name: "b", Default: true}}
	}, Field: "spec.providers.storage", Message: "at most one tenant StorageClass can be the default", Shared: true},
	{Name: "storage classes with storage off", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Providers.Storage = knestv1.StorageProviderSpec{Disabled: true, Classes: []knestv1.TenantStorageClass{{Name: "a"}}}
	}, Field: "spec.providers.storage", Message: "storage.classes need the storage provider", Shared: true},
	{Name: "storage class name with capitals", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Providers.Storage.Classes = []knestv1.TenantStorageClass{{Name: "Fast"}}
	}, Field: "spec.providers.storage.classes[0].name", Message: "a StorageClass name is lower-case letters", Shared: true},
	// Autoscaled pools: bounds instead of replicas, never held at another minor.
	{Name: "autoscaled pool", Mutate: autoscaled(0, 3)},
	{Name: "autoscaled pool of fixed size", Mutate: autoscaled(2, 2)},
	{Name: "autoscaled pool of the most nodes", Mutate: autoscaled(200, 200)},
	{Name: "autoscaled pool with replicas", Mutate: func(nc *knestv1.NestedCluster) {
		autoscaled(1, 3)(nc)
		nc.Spec.Workers[0].Replicas = ptr.To[int32](2)
	}, Field: "spec.workers[0]", Message: "an autoscaled pool takes no replicas", Shared: true},
	{Name: "autoscaled pool with replicas 0", Mutate: func(nc *knestv1.NestedCluster) {
		autoscaled(0, 3)(nc)
		nc.Spec.Workers[0].Replicas = ptr.To[int32](0)
	}, Field: "spec.workers[0]", Message: "an autoscaled pool takes no replicas", Shared: true},
	{Name: "autoscaling minimum above maximum", Mutate: autoscaled(3, 2),
		Field: "spec.workers[0].autoscaling", Message: "autoscaling.minReplicas must be at most autoscaling.maxReplicas", Shared: true},
	{Name: "autoscaling maximum of 0", Mutate: autoscaled(0, 0), Field: "spec.workers[0].autoscaling.maxReplicas", Message: "from 1 to 200"},
	{Name: "autoscaling maximum of 201", Mutate: autoscaled(0, 201), Field: "spec.workers[0].autoscaling.maxReplicas", Message: "from 1 to 200"},
	{Name: "autoscaling minimum below 0", Mutate: autoscaled(-1, 2), Field: "spec.workers[0].autoscaling.minReplicas", Message: "from 0 to 200"},
	{Name: "autoscaled pool held a minor back", Mutate: func(nc *knestv1.NestedCluster) {
		autoscaled(0, 3)(nc)
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}, Field: "spec.workers[0].autoscaling", Message: kubever.HeldPoolAutoscaledMessage, Shared: true},
	{Name: "autoscaled pool held at an older patch", Mutate: func(nc *knestv1.NestedCluster) {
		autoscaled(0, 3)(nc)
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.35.3"
	}},
	{Name: "autoscaled pool beside a held one", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
		nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "burst", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 5}})
	}},
	{Name: "two control-plane nodes", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 2 }, Field: "spec.controlPlane.replicas", Message: "1, 3, 5 or 7"},
	{Name: "nine control-plane nodes", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 9 }, Field: "spec.controlPlane.replicas", Message: "1, 3, 5 or 7"},
	{Name: "control plane with one CPU", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.CPU = 1 }, Field: "spec.controlPlane.cpu", Message: "at least 2"},
	{Name: "control plane with little memory", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Memory = qty("1Gi") }, Field: "spec.controlPlane.memory", Message: "at least 1700Mi"},
	{Name: "worker with 129 CPUs", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].CPU = 129 }, Field: "spec.workers[0].cpu", Message: "from 1 to 128"},
	{Name: "worker with little memory", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Memory = qty("512Mi") }, Field: "spec.workers[0].memory", Message: "at least 1Gi"},
	{Name: "pool name too long", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = strings.Repeat("p", 16) }, Field: "spec.workers[0].name", Message: "at most 15 characters"},
	{Name: "pool name with underscore", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = "gpu_a" }, Field: "spec.workers[0].name", Message: "DNS label"},
	{Name: "pool replicas 201", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To[int32](201) }, Field: "spec.workers[0].replicas", Message: "from 0 to 200"},
	{Name: "pool replicas negative", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To[int32](-1) }, Field: "spec.workers[0].replicas", Message: "from 0 to 200"},
	{Name: "duplicate pool", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers = append(nc.Spec.Workers, nc.Spec.Workers[0]) }, Field: "spec.workers[1].name", Message: "Duplicate"},
	{Name: "datavolume without size", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].RootDisk.Type = knestv1.RootDiskDataVolume }, Field: "spec.workers[0].rootDisk.size", Message: "required when rootDisk.type is DataVolume"},
	{Name: "unknown root disk type", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].RootDisk.Type = "PVC" }, Field: "spec.workers[0].rootDisk.type", Message: "Unsupported value"},
	{Name: "pod CIDR not a CIDR", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.0.0.0" }, Field: "spec.network.podCIDR", Message: "IPv4 CIDR with a prefix from /8 to /24"},
	{Name: "pod CIDR IPv6", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "fd00::/64" }, Field: "spec.network.podCIDR", Message: "IPv4"},
	{Name: "pod CIDR too small", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.0.0.0/25" }, Field: "spec.network.podCIDR", Message: "/8 to /24"},
	{Name: "service CIDR too big", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.ServiceCIDR = "10.0.0.0/8" }, Field: "spec.network.serviceCIDR", Message: "/12 to /24"},
	{Name: "host bits set are fine", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.243.1.0/16" }},
	{Name: "overlapping CIDRs", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.ServiceCIDR = "10.243.128.0/20" }, Field: "spec.network", Message: "must not overlap"},
	{Name: "service CIDR containing the pods", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Network.PodCIDR = "10.96.1.0/24"
		nc.Spec.Network.ServiceCIDR = "10.96.0.0/12"
	}, Field: "spec.network", Message: "must not overlap"},
	{Name: "DNS domain with upper case", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.DNSDomain = "Tenant.local" }, Field: "spec.network.dnsDomain", Message: "DNS name"},
	{Name: "unknown CNI", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.CNI = "calico" }, Field: "spec.network.cni", Message: "Unsupported value"},
	{Name: "unknown service type", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.ServiceType = "ExternalName" }, Field: "spec.apiServer.serviceType", Message: "Unsupported value"},
	{Name: "too many cert SANs", Mutate: func(nc *knestv1.NestedCluster) {
		for i := 0; i < 33; i++ {
			nc.Spec.APIServer.CertSANs = append(nc.Spec.APIServer.CertSANs, "san")
		}
	}, Field: "spec.apiServer.certSANs", Message: "Too many"},
	{Name: "twelve pools", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers = nil
		for i := 0; i < 12; i++ {
			nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "p" + strings.Repeat("a", i)})
		}
	}},
	{Name: "too many pools", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers = nil
		for i := 0; i < 13; i++ {
			nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "p" + strings.Repeat("a", i)})
		}
	}, Field: "spec.workers", Message: "Too many"},
	{Name: "version with a leading zero", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.35.04" }, Field: "spec.version", Message: "v1.MINOR.PATCH", Shared: true},
	{Name: "pool named cp", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = "cp" }, Field: "spec.workers[0].name", Message: "pool name cp is reserved", Shared: true},
	{Name: "worker with 2Ti", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Memory = qty("2Ti") }, Field: "spec.workers[0]", Message: "memory must be at most 1Ti", Shared: true},
	{Name: "control plane with 2Ti", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Memory = qty("2Ti") }, Field: "spec.controlPlane", Message: "memory must be at most 1Ti", Shared: true},
	{Name: "zero root disk", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("0")}
	}, Field: "spec.workers[0].rootDisk", Message: "rootDisk.size must be more than 0 and at most 64Ti", Shared: true},
	{Name: "root disk of 1Pi", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("1Pi")}
	}, Field: "spec.workers[0].rootDisk", Message: "rootDisk.size must be more than 0 and at most 64Ti", Shared: true},
	{Name: "labels kubelet accepts", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{"accelerator": "a10", "example.com/team": "ml_1", "node.kubernetes.io/exclude-from-external-load-balancers": "", "topology.kubernetes.io/zone": "z1"}
	}},
	{Name: "label key with a space", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{"gpu type": "a10"}
	}, Field: "spec.workers[0].labels", Message: "label keys must be qualified names", Shared: true},
	{Name: "node-role label", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{"node-role.kubernetes.io/gpu": ""}
	}, Field: "spec.workers[0].labels", Message: "refused by kubelet", Shared: true},
	{Name: "label value that splits into another label", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{"team": "ml,evil=1"}
	}, Field: "spec.workers[0].labels", Message: "label values must be at most 63", Shared: true},
	{Name: "labels too long once joined", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{}
		for i := 0; i < 20; i++ {
			nc.Spec.Workers[0].Labels[fmt.Sprintf("example.com/label-%02d", i)] = knestv1.LabelValue(strings.Repeat("v", 40))
		}
	}, Field: "spec.workers[0].labels", Message: "labels must fit kubelet's --node-labels",
		NotOnServer: "a CEL rule joining a map's keys exceeds the API server's cost budget: map keys have no length limit in a CRD schema"},
	{Name: "taints kubelet accepts", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Taints = []knestv1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}
	}},
	{Name: "unknown taint effect", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Taints = []knestv1.Taint{{Key: "gpu", Value: "true", Effect: "NoScheduel"}}
	}, Field: "spec.workers[0].taints", Message: "taint effect must be NoSchedule, PreferNoSchedule or NoExecute", Shared: true},
	{Name: "taint key with a space", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Taints = []knestv1.Taint{{Key: "gpu only", Effect: corev1.TaintEffectNoSchedule}}
	}, Field: "spec.workers[0].taints", Message: "taint keys must be qualified names", Shared: true},
	{Name: "taint value with a comma", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Taints = []knestv1.Taint{{Key: "gpu", Value: "a,b", Effect: corev1.TaintEffectNoSchedule}}
	}, Field: "spec.workers[0].taints", Message: "taint values must be at most 63", Shared: true},
	{Name: "API host neither a name nor an IP", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.Host = "https://api.example.com" }, Field: "spec.apiServer.host", Message: "apiServer.host must be a DNS name or an IP address", Shared: true},
	{Name: "API host IPv6", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.Host = "2001:db8::10" }},
	{Name: "wildcard cert SAN", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.APIServer.CertSANs = []string{"*.tenant.example.com", "192.0.2.10"}
	}},
	{Name: "cert SAN with a port", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.CertSANs = []string{"api.example.com:6443"} }, Field: "spec.apiServer.certSANs", Message: "apiServer.certSANs must be DNS names", Shared: true},
	{Name: "device without a resource name", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].GPUs = []knestv1.DeviceSpec{{Name: "gpu1"}}
	}, Field: "spec.workers[0].gpus[0].deviceName", Message: "Required"},

	// Image references, as the kubelet parses them (github.com/distribution/reference).
	{Name: "images the kubelet pulls", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Image = "quay.io/example/node:v1.35.4"
		nc.Spec.Workers[0].Image = "localhost:5000/knest/node@sha256:" + strings.Repeat("ab", 32)
		nc.Spec.Workers = append(nc.Spec.Workers,
			knestv1.WorkerPool{Name: "a", MachineSpec: knestv1.MachineSpec{Image: "node"}},
			knestv1.WorkerPool{Name: "b", MachineSpec: knestv1.MachineSpec{Image: "Registry.Example.com:5000/team_a/node__x--y:V1.35.4-rc.1"}},
			knestv1.WorkerPool{Name: "c", MachineSpec: knestv1.MachineSpec{Image: "[fd00::1]:5000/node:v1.35.4@sha512:" + strings.Repeat("0", 128)}})
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "registry.example.com/knest/node-kernel:v1.35.4"}
	}},
	{Name: "image with an upper-case path", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = "quay.io/Example/node:v1" }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with a scheme", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Image = "https://quay.io/example/node" }, Field: "spec.controlPlane.image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with a space", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = "knest/node: v1.35.4" }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with an empty tag", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = "knest/node:" }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with a short digest", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = "knest/node@sha256:abc123" }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with an unknown digest algorithm", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Image = "knest/node@md5:" + strings.Repeat("a", 32)
	}, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image of 64 hex digits", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = strings.Repeat("ab", 32) }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image with a tag of 129 characters", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = "knest/node:" + strings.Repeat("v", 129) }, Field: "spec.workers[0].image", Message: "image must be a container image reference", Shared: true},
	{Name: "image path over 255 characters once normalized", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Image = strings.Repeat("a", 250) }, Field: "spec.workers[0].image", Message: "image must be a container image reference",
		NotOnServer: "the 255-character limit applies to the path after docker.io/library/ is prefixed to a familiar name; a CEL rule would have to repeat that normalization, so the CRD checks the grammar and the CLI (github.com/distribution/reference) the length"},
	{Name: "kernel-boot image with upper case", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/Node-Kernel:v1.35.4"}
	}, Field: "spec.workers[0].kernelBoot.image", Message: "image must be a container image reference", Shared: true},

	// Kernel-boot paths, as KubeVirt's ValidatePath takes them.
	{Name: "kernel-boot paths KubeVirt takes", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:v1.35.4", KernelPath: "/boot/..vmlinuz-6.1/", InitrdPath: "/.boot/initrd.img"}
	}},
	{Name: "relative kernel path", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:v1.35.4", KernelPath: "boot/vmlinuz"}
	}, Field: "spec.workers[0].kernelBoot.kernelPath", Message: "kernelBoot paths must be absolute paths", Shared: true},
	{Name: "initrd path with ..", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:v1.35.4", InitrdPath: "/boot/../initrd.img"}
	}, Field: "spec.workers[0].kernelBoot.initrdPath", Message: "kernelBoot paths must be absolute paths", Shared: true},
	{Name: "kernel path of /", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:v1.35.4", KernelPath: "/"}
	}, Field: "spec.workers[0].kernelBoot.kernelPath", Message: "kernelBoot paths must be absolute paths", Shared: true},

	// GPU and host-device names: extended resource names, as the kubelet takes them.
	{Name: "device resource names the kubelet takes", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].GPUs = []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}}
		nc.Spec.Workers[0].HostDevices = []knestv1.DeviceSpec{{Name: "kvm", DeviceName: "devices.kubevirt.io/kvm"}, {Name: "nic", DeviceName: "intel.com/" + strings.Repeat("n", 63)}}
	}},
	{Name: "GPU resource name without a domain", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].GPUs = []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "GA102GL_A10"}}
	}, Field: "spec.workers[0].gpus[0].deviceName", Message: "deviceName must be an extended resource name", Shared: true},
	{Name: "GPU resource name with a space", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].GPUs = []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL A10"}}
	}, Field: "spec.workers[0].gpus[0].deviceName", Message: "deviceName must be an extended resource name", Shared: true},
	{Name: "host device in the kubernetes.io namespace", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].HostDevices = []knestv1.DeviceSpec{{Name: "nic", DeviceName: "devices.kubernetes.io/nic"}}
	}, Field: "spec.workers[0].hostDevices[0].deviceName", Message: "deviceName must be an extended resource name", Shared: true},
	{Name: "host device with an upper-case domain", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].HostDevices = []knestv1.DeviceSpec{{Name: "nic", DeviceName: "Intel.com/nic"}}
	}, Field: "spec.workers[0].hostDevices[0].deviceName", Message: "deviceName must be an extended resource name", Shared: true},
	{Name: "host device name of 64 characters", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].HostDevices = []knestv1.DeviceSpec{{Name: "nic", DeviceName: "intel.com/" + strings.Repeat("n", 64)}}
	}, Field: "spec.workers[0].hostDevices[0].deviceName", Message: "deviceName must be an extended resource name", Shared: true},

	// Storage classes: a DNS subdomain, as the API server takes a PVC's class.
	{Name: "storage class CDI takes", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi"), StorageClassName: "ceph.rbd-ssd"}
	}},
	{Name: "storage class with upper case", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi"), StorageClassName: "Fast_SSD"}
	}, Field: "spec.workers[0].rootDisk.storageClassName", Message: "rootDisk.storageClassName must be a storage class name", Shared: true},
	{Name: "control-plane storage class ending in a dot", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi"), StorageClassName: "fast."}
	}, Field: "spec.controlPlane.rootDisk.storageClassName", Message: "rootDisk.storageClassName must be a storage class name", Shared: true},

	// DNS names: every label at most 63 characters, as CoreDNS and resolvers take them.
	{Name: "DNS domain with a label of 63", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.DNSDomain = strings.Repeat("d", 63) + ".local" }},
	{Name: "DNS domain with a label of 64", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Network.DNSDomain = strings.Repeat("d", 64) + ".local" }, Field: "spec.network.dnsDomain", Message: "network.dnsDomain must be a DNS name: labels of at most 63", Shared: true},
	{Name: "API host with a label of 64", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.APIServer.Host = "api." + strings.Repeat("h", 64) + ".example.com"
	}, Field: "spec.apiServer.host", Message: "apiServer.host must be a DNS name or an IP address", Shared: true},
	{Name: "cert SAN with a label of 64", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.APIServer.CertSANs = []string{"*." + strings.Repeat("s", 64) + ".example.com"}
	}, Field: "spec.apiServer.certSANs", Message: "apiServer.certSANs must be DNS names", Shared: true},
}

// ManifestCase is a NestedCluster only a manifest can carry: a typed NestedCluster
// cannot hold a quantity that does not parse. pkg/validation's Quantities (which
// `knest create -f` runs before decoding) and the API server are held to the same
// message.
type ManifestCase struct {
	Name string
	// Set changes the unstructured content of Valid().
	Set func(obj map[string]any)
	// Field and Message as in Case; the API server says the same Message.
	Field, Message string
}

// ValidContent is Valid() as unstructured content.
func ValidContent() map[string]any {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(Valid())
	if err != nil {
		panic(err)
	}
	obj["apiVersion"] = knestv1.GroupVersion.String()
	obj["kind"] = "NestedCluster"
	return obj
}

func pool0(obj map[string]any) map[string]any {
	return obj["spec"].(map[string]any)["workers"].([]any)[0].(map[string]any)
}

// ManifestCases are quantities that parse and that do not.
var ManifestCases = []ManifestCase{
	{Name: "memory as a plain number of bytes", Set: func(obj map[string]any) { pool0(obj)["memory"] = int64(4 << 30) }},
	{Name: "memory in decimal units", Set: func(obj map[string]any) { pool0(obj)["memory"] = "4G" }},
	{Name: "memory in GB", Set: func(obj map[string]any) { pool0(obj)["memory"] = "4GB" },
		Field: "spec.workers[0].memory", Message: "memory must be a quantity such as 4Gi"},
	{Name: "control-plane memory in words", Set: func(obj map[string]any) {
		obj["spec"].(map[string]any)["controlPlane"] = map[string]any{"memory": "lots"}
	}, Field: "spec.controlPlane.memory", Message: "memory must be a quantity such as 4Gi"},
	{Name: "root disk size with a space", Set: func(obj map[string]any) {
		pool0(obj)["rootDisk"] = map[string]any{"type": "DataVolume", "size": "20 Gi"}
	}, Field: "spec.workers[0].rootDisk.size", Message: "rootDisk.size must be a quantity such as 20Gi"},
}

// UpdateCase is a change from one valid NestedCluster to another spec.
type UpdateCase struct {
	Name     string
	Old, New func(*knestv1.NestedCluster)
	// Field and Message as in Case; the API server's transition rules say the same.
	Field, Message string
}

// UpdateCases are version and held-pool changes the CRD's transition rules allow or refuse;
// pkg/validation's Update and the API server are held to the same.
var UpdateCases = []UpdateCase{
	{Name: "patch upgrade", Old: version("v1.34.3"), New: version("v1.34.4")},
	{Name: "minor upgrade", Old: version("v1.34.4"), New: version("v1.35.4")},
	{Name: "minor upgrade holding a pool", Old: version("v1.34.4"), New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}},
	{Name: "held pool catches up", Old: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}, New: version("v1.35.4")},
	{Name: "downgrade", Old: version("v1.35.4"), New: version("v1.35.3"), Field: "spec.version", Message: kubever.DowngradeMessage},
	{Name: "skipping a minor", Old: version("v1.34.4"), New: version("v1.36.0"), Field: "spec.version", Message: kubever.SkipMinorMessage},
	{Name: "holding a pool below what it runs", Old: version("v1.35.4"), New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}, Field: "spec.workers[0].version", Message: kubever.PoolBackMessage},
	{Name: "held pool going back", Old: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}, New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.3"
	}, Field: "spec.workers[0].version", Message: kubever.PoolBackMessage},
	{Name: "held pool scaled down", Old: heldPool(3), New: heldPool(1)},
	{Name: "held pool scaled to zero and kept there", Old: heldPool(0), New: heldPool(0)},
	{Name: "pool held at an older patch grows", Old: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.35.3"
	}, New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.35.3"
		nc.Spec.Workers[0].Replicas = ptr.To[int32](5)
	}},
	{Name: "held pool released and grown at once", Old: heldPool(2), New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = ""
		nc.Spec.Workers[0].Replicas = ptr.To[int32](4)
	}},
	{Name: "held pool grows", Old: heldPool(2), New: heldPool(3),
		Field: "spec.workers[0].replicas", Message: kubever.HeldPoolGrowMessage},
	{Name: "held pool back from zero", Old: heldPool(0), New: heldPool(1),
		Field: "spec.workers[0].replicas", Message: kubever.HeldPoolGrowMessage},
	{Name: "pool held and grown by the upgrade", Old: version("v1.34.4"), New: func(nc *knestv1.NestedCluster) {
		heldPool(3)(nc)
	}, Field: "spec.workers[0].replicas", Message: kubever.HeldPoolGrowMessage},
	{Name: "held pool added with replicas", Old: heldPool(2), New: func(nc *knestv1.NestedCluster) {
		heldPool(2)(nc)
		nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To[int32](1), Version: "v1.34.4"})
	}, Field: "spec.workers[1].replicas", Message: kubever.HeldPoolGrowMessage},
	{Name: "pool becomes autoscaled", Old: version("v1.35.4"), New: autoscaled(1, 4)},
	{Name: "autoscaled pool takes replicas again", Old: autoscaled(1, 4), New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Autoscaling = nil
		nc.Spec.Workers[0].Replicas = ptr.To[int32](3)
	}},
	{Name: "autoscaled pool held by the upgrade", Old: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.34.4"
		autoscaled(0, 3)(nc)
	}, New: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
	}, Field: "spec.workers[0].autoscaling", Message: kubever.HeldPoolAutoscaledMessage},
}

// autoscaled makes pool workers autoscaled between lo and hi, without replicas.
func autoscaled(lo, hi int32) func(*knestv1.NestedCluster) {
	return func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].Replicas = nil
		nc.Spec.Workers[0].Autoscaling = &knestv1.PoolAutoscaling{MinReplicas: lo, MaxReplicas: hi}
	}
}

// heldPool holds pool workers at v1.34.4 with n replicas under spec.version v1.35.4.
func heldPool(n int32) func(*knestv1.NestedCluster) {
	return func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[0].Version = "v1.34.4"
		nc.Spec.Workers[0].Replicas = ptr.To(n)
	}
}

func version(v string) func(*knestv1.NestedCluster) {
	return func(nc *knestv1.NestedCluster) { nc.Spec.Version = v }
}
