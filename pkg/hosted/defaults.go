package hosted

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Default resources of the hosted containers: a CPU and memory request and a
// memory limit each. Peak working sets measured on kind (the kubelet's summary API
// every 15 s over two runs of make e2e's hosted tenants: three etcd members, one
// worker, create, webhooks, etcd pods deleted, backup and restore, a second
// tenant): kube-apiserver 245 MiB, kube-controller-manager 52, kube-scheduler 20,
// etcd 36, konnectivity-server 9; the kubeadm containers ran to completion within
// their limit. Memory requests are about the peak of a small tenant; limits leave 4
// (kube-apiserver) to 28 (etcd, whose memory grows with the tenant's objects and its
// raft log) times that for larger tenants. CPU requests are about the use of a
// tenant at rest (make bench-density: the kubelet's figures, median over tenants,
// docs/benchmark.md), 39m in all, so that twenty idle tenants fit a 2-core host
// beside its own pods; what a tenant uses above that it gets from the node's idle
// CPU, shared by requests under contention. A tenant that needs more raises
// controlPlane.hosted.*.resources.
//
// The memory limit keeps a leaking component from pressing the host node: it is
// OOM-killed in its own container. There is no CPU limit: CFS throttling stalls
// the API server (slow requests, failed probes, lost leases) while the node's
// CPU sits idle; the request already shares CPU under contention.
const (
	apiServerCPU, apiServerMemory, apiServerMemoryLimit                   = "20m", "256Mi", "1Gi"
	controllerManagerCPU, controllerManagerMemory, controllerManagerLimit = "8m", "64Mi", "384Mi"
	schedulerCPU, schedulerMemory, schedulerMemoryLimit                   = "2m", "32Mi", "192Mi"
	etcdCPU, etcdMemory, etcdMemoryLimit                                  = "8m", "64Mi", "1Gi"
	konnectivityCPU, konnectivityMemory, konnectivityMemoryLimit          = "1m", "16Mi", "128Mi"
	kubeadmCPU, kubeadmMemory, kubeadmMemoryLimit                         = "10m", "32Mi", "256Mi"
)

var (
	apiServerDefaults         = defaults(apiServerCPU, apiServerMemory, apiServerMemoryLimit)
	controllerManagerDefaults = defaults(controllerManagerCPU, controllerManagerMemory, controllerManagerLimit)
	schedulerDefaults         = defaults(schedulerCPU, schedulerMemory, schedulerMemoryLimit)
	etcdDefaults              = defaults(etcdCPU, etcdMemory, etcdMemoryLimit)
	konnectivityDefaults      = defaults(konnectivityCPU, konnectivityMemory, konnectivityMemoryLimit)
	kubeadmDefaults           = defaults(kubeadmCPU, kubeadmMemory, kubeadmMemoryLimit)
)

func defaults(cpu, memory, memoryLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryLimit)},
	}
}

// withDefaults is a container's resources: each request and limit the spec gives,
// and the default for each it leaves out. A default never goes against a given
// value: a default limit below the given request is dropped, and a default request
// above the given limit becomes that limit (what Kubernetes does for a limit alone).
func withDefaults(spec, def corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *spec.DeepCopy()
	for name, d := range def.Requests {
		if _, ok := out.Requests[name]; ok {
			continue
		}
		if l, ok := out.Limits[name]; ok && l.Cmp(d) < 0 {
			d = l
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = d.DeepCopy()
	}
	for name, d := range def.Limits {
		if _, ok := out.Limits[name]; ok {
			continue
		}
		if r, ok := out.Requests[name]; ok && r.Cmp(d) > 0 {
			continue
		}
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[name] = d.DeepCopy()
	}
	return out
}
