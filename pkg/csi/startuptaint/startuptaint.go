// Package startuptaint keeps pods that need a volume off a tenant node until the
// node's CSI plugin has registered with its kubelet.
//
// knest's workers join with Taint. Without it the scheduler places a pod with a
// claim on a node that has just become Ready, before the node plugin's DaemonSet pod
// runs there; kubelet's CSINode then lacks the driver, the attach/detach controller's
// attach fails ("CSINode ... does not contain driver") and backs off exponentially, and
// the pod waits minutes longer than the plugin took. The node plugin's DaemonSet, the
// CNI, kube-proxy and konnectivity's agent tolerate the taint; the Reconciler removes
// it once the node's CSINode lists the driver. This is the AWS EBS CSI driver's
// agent-not-ready taint, with the removal done from the host (the CSI controller,
// which already holds the tenant's kubeconfig) so that the node plugin keeps no
// credentials of the tenant's API.
//
// The key carries cluster-autoscaler's startup-taint prefix: the autoscaler treats
// such a node as not yet ready rather than as a node pods do not fit on, and leaves
// the taint out of the node templates it scales up from.
package startuptaint

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

// Taint is on a tenant worker from its registration until its node plugin has
// registered. NoSchedule: nothing runs there before the taint is put, so there is
// nothing to evict, and the DaemonSets that must come first (the CNI's tolerates
// NoSchedule only) still start.
var Taint = corev1.Taint{
	Key:    "startup-taint.cluster-autoscaler.kubernetes.io/knest-csi",
	Value:  "registering",
	Effect: corev1.TaintEffectNoSchedule,
}

// Reconciler removes Taint from a tenant Node whose CSINode lists the driver.
type Reconciler struct {
	// Client is a client of the tenant cluster.
	Client client.Client
}

// SetupWithManager runs the reconciler in mgr, a manager of the tenant cluster: a
// Node's request comes from its own events (a node registered with the taint after
// its CSINode listed the driver: a kubelet restart) and from its CSINode's (the
// plugin registered).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("knest-csi-startup-taint").
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			n, ok := o.(*corev1.Node)
			return ok && HasTaint(n)
		}))).
		// A CSINode is named after its Node.
		Watches(&storagev1.CSINode{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		})).
		Complete(r)
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !HasTaint(node) {
		return ctrl.Result{}, nil
	}
	csiNode := &storagev1.CSINode{}
	if err := r.Client.Get(ctx, req.NamespacedName, csiNode); err != nil {
		// Kubelet creates it; its event brings the node back.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == knestcsi.DriverName }) {
		return ctrl.Result{}, nil
	}
	// The optimistic lock keeps a taint that someone put since this read: a merge
	// patch replaces the whole list, so a stale one would drop it. A conflict is
	// retried with the Node read again.
	before := node.DeepCopy()
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, isTaint)
	if err := r.Client.Patch(ctx, node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to remove the taint %s from node %s: %w", Taint.Key, node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Node's CSI plugin registered: removed its startup taint", "node", node.Name)
	return ctrl.Result{}, nil
}

// HasTaint says whether node still has Taint.
func HasTaint(node *corev1.Node) bool { return slices.ContainsFunc(node.Spec.Taints, isTaint) }

func isTaint(t corev1.Taint) bool { return t.Key == Taint.Key && t.Effect == Taint.Effect }
