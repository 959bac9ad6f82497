package nestedcluster

import (
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/apply"
)

// applier applies the NestedCluster's objects: the cluster is their controller,
// except for those Cluster API's Cluster controller claims.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, FieldOwner: FieldOwner, PlainOwner: ControlledByCluster}
}

// ControlledByCluster tells the objects that Cluster API's Cluster controller owns:
// those its infrastructureRef and controlPlaneRef name. Up to v1.12 it made itself
// their controller and refused while another held them ("Object ... is already owned
// by another NestedCluster controller"); since v1.13 it is a plain owner unless the
// Cluster has a topology. knest stays a plain owner of these either way, so clusters
// made under either release reconcile alike. The apply removes a controller flag
// that an earlier knest set.
func ControlledByCluster(obj client.Object) bool {
	switch obj.(type) {
	case *capkv1.KubevirtCluster, *controlplanev1.KubeadmControlPlane, *hcpv1.HostedControlPlane:
		return true
	}
	return false
}
