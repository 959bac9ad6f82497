package nestedcluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

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
	// Hosted only: whether etcd is on a claim (nil: not decided yet), and the
	// HostedControlPlane's Available condition when it waits for something it
	// cannot do by itself (no StorageClass, kubeadm's Job failing).
	etcdPersistent *bool
	blocked        *metav1.Condition
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
		initialized:    ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false),
		current:        ptr.Deref(hcp.Status.Replicas, 0),
		ready:          ptr.Deref(hcp.Status.ReadyReplicas, 0),
		upToDate:       ptr.Deref(hcp.Status.UpToDateReplicas, 0),
		statusVersion:  hcp.Status.Version,
		etcdPersistent: hcp.Status.EtcdPersistent,
		blocked:        blocked(hcp),
	}
}

func blocked(hcp *hcpv1.HostedControlPlane) *metav1.Condition {
	c := conditions.Get(hcp, hcpv1.AvailableCondition)
	if c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != hcpv1.NoStorageClassReason && c.Reason != hcpv1.TenantBootstrapFailedReason {
		return nil
	}
	return c
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
