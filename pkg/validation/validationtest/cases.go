// Package validationtest holds NestedCluster validation cases shared by the unit tests
// of pkg/validation and the integration tests that run them against the API server.
package validationtest

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
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

// Case is one validation case.
type Case struct {
	Name   string
	Mutate func(*knestv1.NestedCluster)
	// Field and Message are fragments of the expected error; empty for valid cases.
	Field, Message string
}

// Cases are valid and invalid NestedClusters with the error each invalid one gets.
// pkg/validation tests them against its rules, and the CLI's integration tests
// against the API server, so the two stay in step.
var Cases = []Case{
	{Name: "minimal", Mutate: func(*knestv1.NestedCluster) {}},
	{Name: "everything set", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.28.15"
		nc.Spec.ControlPlane = knestv1.ControlPlaneSpec{Replicas: 7, MachineSpec: knestv1.MachineSpec{CPU: 4, Memory: qty("1700Mi")}}
		nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To[int32](0),
			MachineSpec: knestv1.MachineSpec{CPU: 128, Memory: qty("1Gi"), RootDisk: knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: qty("20Gi")}},
			GPUs:        []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}}})
		nc.Spec.Network = knestv1.NetworkSpec{PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", DNSDomain: "team-a.internal", CNI: knestv1.CNINone}
		nc.Spec.APIServer = knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, Host: "api.example.com", CertSANs: []string{"10.0.0.1"}}
	}},
	{Name: "name of 30 characters", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = strings.Repeat("a", 30) }},
	{Name: "name of 31 characters", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = strings.Repeat("a", 31) }, Field: "metadata.name", Message: "must have at most 30"},
	{Name: "name with upper case", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "Demo" }, Field: "metadata.name", Message: "DNS label"},
	{Name: "name starting with a digit", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "1demo" }, Field: "metadata.name", Message: "starting with a letter"},
	{Name: "name ending with a dash", Mutate: func(nc *knestv1.NestedCluster) { nc.Name = "demo-" }, Field: "metadata.name", Message: "DNS label"},
	{Name: "version without v", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "1.34.3" }, Field: "spec.version", Message: "v1.MINOR.PATCH"},
	{Name: "version too old", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.27.0" }, Field: "spec.version", Message: "from 28 to 34"},
	{Name: "version too new", Mutate: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.35.0" }, Field: "spec.version", Message: "from 28 to 34"},
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
	{Name: "device without a resource name", Mutate: func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].GPUs = []knestv1.DeviceSpec{{Name: "gpu1"}}
	}, Field: "spec.workers[0].gpus[0].deviceName", Message: "Required"},
}
