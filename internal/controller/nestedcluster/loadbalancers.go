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
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// deleteLoadBalancers deletes the host objects of nc's load balancers that its cloud
// controller manager made (Services, their EndpointSlices and NetworkPolicies, found
// by the provider's cluster label), for a tenant that is gone or whose provider is
// turned off: nothing else would. They are read uncached, as knest does not
// otherwise watch the host's Services.
func (r *Reconciler) deleteLoadBalancers(ctx context.Context, nc *knestv1.NestedCluster) error {
	opts := []client.ListOption{client.InNamespace(nc.Namespace), client.MatchingLabels{cloudprovider.ClusterLabel: nc.Name}}
	for _, list := range []client.ObjectList{&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &networkingv1.NetworkPolicyList{}} {
		if err := r.APIReader.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("failed to list the cluster's load balancers: %w", err)
		}
		var objs []client.Object
		if err := metaEachListItem(list, func(obj client.Object) { objs = append(objs, obj) }); err != nil {
			return err
		}
		for _, obj := range objs {
			if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete %T %s of a load balancer: %w", obj, obj.GetName(), err)
			}
			ctrl.LoggerFrom(ctx).Info("Deleted a host load-balancer object of the cluster", "type", fmt.Sprintf("%T", obj), "object", klog.KObj(obj))
		}
	}
	return nil
}
