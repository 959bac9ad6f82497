package cluster

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

// Pool is the objects of one worker pool.
type Pool struct {
	Name              string
	MachineTemplate   *capkv1.KubevirtMachineTemplate
	BootstrapTemplate *bootstrapv1.KubeadmConfigTemplate
	MachineDeployment *clusterv1.MachineDeployment
	HealthCheck       *clusterv1.MachineHealthCheck
}

// PoolReplicas is the replicas knest sets on a pool's MachineDeployment: the spec's,
// 1 when unset, and nil for an autoscaled pool, whose replicas knest never owns (the
// autoscaler sets them through the scale subresource). A pool that stops being
// autoscaled gets its spec's replicas again (unset: 1), which knest's apply takes back
// from the autoscaler.
func PoolReplicas(p knestv1.WorkerPool) *int32 {
	if Autoscaled(p) {
		return nil
	}
	return ptr(p.ReplicasOrDefault())
}

func (r renderer) pool(p knestv1.WorkerPool) (Pool, error) {
	name := PoolName(r.name, p.Name)
	version := PoolVersion(r.nc, p)
	mt, err := r.machineTemplate(p.Name, name, version, p.MachineSpec, p.GPUs, p.HostDevices, nil)
	if err != nil {
		return Pool{}, err
	}
	bt, err := r.bootstrapTemplate(name, p)
	if err != nil {
		return Pool{}, err
	}
	machineLabels := map[string]string{
		knestv1.ClusterNameLabel:             r.name,
		knestv1.PoolNameLabel:                p.Name,
		clusterv1.ClusterNameLabel:           r.name,
		clusterv1.MachineDeploymentNameLabel: name,
	}
	md := &clusterv1.MachineDeployment{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("MachineDeployment")),
		ObjectMeta: r.meta(name, p.Name),
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: r.name,
			Replicas:    PoolReplicas(p),
			Selector:    metav1.LabelSelector{MatchLabels: machineLabels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: machineLabels},
				Spec: clusterv1.MachineSpec{
					ClusterName: r.name,
					Version:     version,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group,
						Kind:     "KubeadmConfigTemplate",
						Name:     bt.Name,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: capkv1.GroupVersion.Group,
						Kind:     "KubevirtMachineTemplate",
						Name:     mt.Name,
					},
					Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: p.NodeDrainTimeoutSeconds},
				},
			},
		},
	}
	if Autoscaled(p) {
		// knest leaves replicas out, so its server-side apply neither sets nor owns
		// them. Cluster API's defaulting webhook (v1.13
		// internal/webhooks/machinedeployment.go, calculateMachineDeploymentReplicas)
		// then fills them from these annotations: a new MachineDeployment starts at
		// the min size; an existing one whose replicas an apply drops (a pool that
		// becomes autoscaled, or knest re-applying after the webhook's value was
		// attributed to it) keeps its count clamped into [min, max]. Once the
		// autoscaler scales it, through the scale subresource, the field is the
		// autoscaler's, and knest's applies leave it alone.
		md.Annotations = autoscalingAnnotations(p)
	}
	if r.nc.Spec.Paused {
		md.Spec.Paused = ptr(true)
	}
	hc := r.healthCheck(name, p.Name, replicasOf(p), metav1.LabelSelector{MatchLabels: map[string]string{
		clusterv1.ClusterNameLabel:           r.name,
		clusterv1.MachineDeploymentNameLabel: name,
	}})
	return Pool{Name: p.Name, MachineTemplate: mt, BootstrapTemplate: bt, MachineDeployment: md, HealthCheck: hc}, nil
}

func (r renderer) bootstrapTemplate(base string, p knestv1.WorkerPool) (*bootstrapv1.KubeadmConfigTemplate, error) {
	nodeRegistration := bootstrapv1.NodeRegistrationOptions{CRISocket: criSocket, KubeletExtraArgs: slowHostKubeletArgs(r.opts.HostSlowdown)}
	if len(p.Labels) > 0 {
		nodeRegistration.KubeletExtraArgs = append(nodeRegistration.KubeletExtraArgs, bootstrapv1.Arg{Name: "node-labels", Value: ptr(joinLabels(p.Labels))})
	}
	var taints []corev1.Taint
	for _, t := range p.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	if !r.nc.Spec.Providers.Storage.Disabled {
		// Pods with volumes wait for the node's CSI plugin (package startuptaint).
		taints = append(taints, startuptaint.Taint)
	}
	if len(taints) > 0 {
		nodeRegistration.Taints = ptr(taints)
	}
	resumeFile, resumeCommands := resumeBootstrap("join")
	spec := bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{
		Spec: bootstrapv1.KubeadmConfigSpec{
			JoinConfiguration: bootstrapv1.JoinConfiguration{
				NodeRegistration: nodeRegistration, Timeouts: slowHostTimeouts(bootstrapv1.Timeouts{}, r.opts.HostSlowdown),
			},
			Files:               []bootstrapv1.File{resumeFile},
			PostKubeadmCommands: resumeCommands,
		},
	}}
	name, err := hashedName(base, spec)
	if err != nil {
		return nil, err
	}
	return &bootstrapv1.KubeadmConfigTemplate{
		TypeMeta:   typeMeta(bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate")),
		ObjectMeta: r.meta(name, p.Name),
		Spec:       spec,
	}, nil
}

func joinLabels(labels map[string]knestv1.LabelValue) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+string(labels[k]))
	}
	return strings.Join(parts, ",")
}

// replicasOf is the pool's size for its health check: the most nodes it can have.
func replicasOf(p knestv1.WorkerPool) int32 {
	if Autoscaled(p) {
		return p.Autoscaling.MaxReplicas
	}
	return p.ReplicasOrDefault()
}
