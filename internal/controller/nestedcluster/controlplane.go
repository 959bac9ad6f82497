package nestedcluster

import (
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// controlPlaneState is what the status and the upgrade hold read of either kind of
// control plane: a KubeadmControlPlane (VMs) or a HostedControlPlane (pods).
type controlPlaneState struct {
	hosted                         bool
	generation, observedGeneration int64
	// From the spec: replicas, version, and the VM template (empty when hosted).
	replicas int32
	version  string
	template string
	// From the status.
	initialized              bool
	current, ready, upToDate int32
	statusVersion            string
}

func kcpState(kcp *controlplanev1.KubeadmControlPlane) *controlPlaneState {
	if kcp == nil {
		return nil
	}
	return &controlPlaneState{
		generation: kcp.Generation, observedGeneration: kcp.Status.ObservedGeneration,
		replicas: ptr.Deref(kcp.Spec.Replicas, 0), version: kcp.Spec.Version,
		template:      kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name,
		initialized:   ptr.Deref(kcp.Status.Initialization.ControlPlaneInitialized, false),
		current:       ptr.Deref(kcp.Status.Replicas, 0),
		ready:         ptr.Deref(kcp.Status.ReadyReplicas, 0),
		upToDate:      ptr.Deref(kcp.Status.UpToDateReplicas, 0),
		statusVersion: kcp.Status.Version,
	}
}

func hcpState(hcp *hcpv1.HostedControlPlane) *controlPlaneState {
	if hcp == nil {
		return nil
	}
	return &controlPlaneState{
		hosted:     true,
		generation: hcp.Generation, observedGeneration: hcp.Status.ObservedGeneration,
		replicas: ptr.Deref(hcp.Spec.Replicas, 1), version: hcp.Spec.Version,
		initialized:   ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false),
		current:       ptr.Deref(hcp.Status.Replicas, 0),
		ready:         ptr.Deref(hcp.Status.ReadyReplicas, 0),
		upToDate:      ptr.Deref(hcp.Status.UpToDateReplicas, 0),
		statusVersion: hcp.Status.Version,
	}
}

// desiredControlPlane is the control plane knest renders now.
func desiredControlPlane(g *cluster.Graph) *controlPlaneState {
	switch {
	case g == nil:
		return nil
	case g.HostedControlPlane != nil:
		return hcpState(g.HostedControlPlane)
	}
	return kcpState(g.ControlPlane)
}

// exists tells an observed control plane from an empty one the cache did not have.
func (s *controlPlaneState) exists() bool { return s != nil && s.generation > 0 }
