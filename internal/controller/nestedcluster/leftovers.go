package nestedcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cloudprovider"
	csicontroller "github.com/knest-dev/knest/pkg/csi/controller"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// deleteLoadBalancers deletes the host objects of nc's load balancers that its cloud
// controller manager made (Services, their EndpointSlices and NetworkPolicies, found
// by the provider's cluster label), for a tenant that is gone or whose provider is
// turned off: nothing else would.
func (r *Reconciler) deleteLoadBalancers(ctx context.Context, nc *knestv1.NestedCluster) error {
	return r.deleteLabelled(ctx, nc, cloudprovider.ClusterLabel, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &networkingv1.NetworkPolicyList{})
}

// deleteVolumes deletes the host claims of a deleted tenant's volumes, which its CSI
// driver made (found by the driver's cluster label): with the tenant gone, no one
// can use or delete them. Its VMs are gone by then, so none is still plugged in.
func (r *Reconciler) deleteVolumes(ctx context.Context, nc *knestv1.NestedCluster) error {
	return r.deleteLabelled(ctx, nc, csicontroller.ClusterLabel, &corev1.PersistentVolumeClaimList{})
}

// deleteLabelled deletes the objects of lists' kinds in nc's namespace whose label
// says they are nc's. They are read uncached, as knest does not otherwise watch
// these kinds on the host.
func (r *Reconciler) deleteLabelled(ctx context.Context, nc *knestv1.NestedCluster, label string, lists ...client.ObjectList) error {
	opts := []client.ListOption{client.InNamespace(nc.Namespace), client.MatchingLabels{label: nc.Name}}
	for _, list := range lists {
		if err := r.APIReader.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("failed to list the cluster's %T: %w", list, err)
		}
		var objs []client.Object
		if err := metaEachListItem(list, func(obj client.Object) { objs = append(objs, obj) }); err != nil {
			return err
		}
		for _, obj := range objs {
			if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete %T %s: %w", obj, obj.GetName(), err)
			}
			ctrl.LoggerFrom(ctx).Info("Deleted a host object the tenant's provider made", "type", fmt.Sprintf("%T", obj), "object", klog.KObj(obj))
		}
	}
	return nil
}
