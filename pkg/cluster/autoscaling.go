package cluster

import (
	"slices"
	"strconv"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/autoscaler"
)

// The cluster-autoscaler's clusterapi provider reads a node group's size bounds from
// Cluster API's annotations (clusterv1.AutoscalerMinSizeAnnotation and
// AutoscalerMaxSizeAnnotation, whole numbers) and, to scale a group up from zero
// nodes, the shape of the node it would add from these annotations on the
// MachineDeployment. Names and formats are the autoscaler's own
// (k8s.io/autoscaler/cluster-autoscaler cloudprovider/clusterapi/clusterapi_utils.go
// and clusterapi_unstructured.go, and that folder's README.md); knest does not import
// the autoscaler module for a handful of strings.
const (
	// CapacityCPUAnnotation is the node's CPUs, a quantity ("4").
	CapacityCPUAnnotation = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	// CapacityMemoryAnnotation is the node's memory, a quantity ("8Gi").
	CapacityMemoryAnnotation = "capacity.cluster-autoscaler.kubernetes.io/memory"
	// CapacityEphemeralDiskAnnotation is the node's ephemeral storage, a quantity.
	CapacityEphemeralDiskAnnotation = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"
	// CapacityGPUTypeAnnotation is the extended resource name the node's GPUs are
	// advertised under ("nvidia.com/gpu"); counted only together with gpu-count.
	CapacityGPUTypeAnnotation = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	// CapacityGPUCountAnnotation is the number of GPUs, a whole number ("2").
	CapacityGPUCountAnnotation = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	// CapacityMaxPodsAnnotation is the node's pod capacity (the autoscaler assumes
	// 110, kubelet's default, without it; knest leaves kubelet's default too).
	CapacityMaxPodsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	// CapacityLabelsAnnotation is the node's labels, "key=value,key2=value2".
	CapacityLabelsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/labels"
	// CapacityTaintsAnnotation is the node's taints, "key=value:Effect,key2:Effect".
	CapacityTaintsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// Autoscaled reports whether the cluster-autoscaler sizes the pool.
func Autoscaled(p knestv1.WorkerPool) bool { return p.Autoscaling != nil }

// autoscaler renders the tenant's cluster-autoscaler when a pool is autoscaled.
func (r renderer) autoscaler(pools []Pool) *autoscaler.Objects {
	var scaled []string
	for i, p := range r.nc.Spec.Workers {
		if Autoscaled(p) {
			scaled = append(scaled, pools[i].MachineDeployment.Name)
		}
	}
	if len(scaled) == 0 {
		return nil
	}
	return autoscaler.Render(autoscaler.Input{
		Cluster: r.name, Namespace: r.ns, Image: r.opts.AutoscalerImage,
		MachineDeployments: scaled,
		KubeconfigSecret:   KubeconfigSecretName(r.name),
		Spec:               r.nc.Spec.Autoscaler,
		Labels:             r.meta("", "").Labels,
	})
}

// autoscalingAnnotations are the MachineDeployment annotations of an autoscaled pool:
// its bounds and, so the autoscaler can add a first node to an empty pool, the shape
// of its nodes. p must be defaulted.
func autoscalingAnnotations(p knestv1.WorkerPool) map[string]string {
	a := p.Autoscaling
	out := map[string]string{
		clusterv1.AutoscalerMinSizeAnnotation: strconv.Itoa(int(a.MinReplicas)),
		clusterv1.AutoscalerMaxSizeAnnotation: strconv.Itoa(int(a.MaxReplicas)),
		CapacityCPUAnnotation:                 strconv.Itoa(int(p.CPU)),
	}
	if p.Memory != nil {
		out[CapacityMemoryAnnotation] = p.Memory.String()
	}
	// A containerDisk root disk's size is its image's; only a DataVolume's is known.
	if p.RootDisk.Type == knestv1.RootDiskDataVolume && p.RootDisk.Size != nil {
		out[CapacityEphemeralDiskAnnotation] = p.RootDisk.Size.String()
	}
	if n := len(p.GPUs); n > 0 {
		out[CapacityGPUCountAnnotation] = strconv.Itoa(n)
		if t := gpuType(p.GPUs); t != "" {
			out[CapacityGPUTypeAnnotation] = t
		}
	}
	if len(p.Labels) > 0 {
		out[CapacityLabelsAnnotation] = joinLabels(p.Labels)
	}
	if len(p.Taints) > 0 {
		taints := make([]string, 0, len(p.Taints))
		for _, t := range p.Taints {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			taints = append(taints, s+":"+string(t.Effect))
		}
		out[CapacityTaintsAnnotation] = strings.Join(taints, ",")
	}
	return out
}

// gpuType is the resource name the tenant's device plugin advertises a pool's GPUs
// under. knest only knows the host's name for them (deviceName, e.g.
// nvidia.com/GA102GL_A10); inside the VM, NVIDIA's and AMD's device plugins advertise
// <vendor domain>/gpu (nvidia.com/gpu, amd.com/gpu). GPUs of several vendors give
// none: the autoscaler then counts no GPU for a node it adds from zero.
func gpuType(gpus []knestv1.DeviceSpec) string {
	var domains []string
	for _, d := range gpus {
		domain, _, _ := strings.Cut(d.DeviceName, "/")
		if !slices.Contains(domains, domain) {
			domains = append(domains, domain)
		}
	}
	if len(domains) != 1 || domains[0] == "" {
		return ""
	}
	return domains[0] + "/gpu"
}
