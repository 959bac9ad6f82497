// Package etcddisk gives each control-plane VM that asks for one (pkg/vmtemplate's
// annotations) its etcd disk: a claim of the host's, owned by the VM, attached
// before the VM first starts. CAPK creates such VMs Halted; this controller makes
// the claim, adds it to the VM and starts it.
package etcddisk

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// Reconciler attaches etcd disks.
type Reconciler struct {
	Client client.Client
}

// SetupWithManager watches the VMs that carry the etcd-disk annotation.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	asks := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[vmtemplate.EtcdDiskSizeAnnotation]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcddisk").
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(asks)).
		WithOptions(options).
		Complete(r)
}

// Reconcile makes the VM's claim, attaches it and starts the VM, once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !vm.DeletionTimestamp.IsZero() || !vmtemplate.WantsEtcdDisk(vm) {
		return ctrl.Result{}, nil
	}
	pvc, err := vmtemplate.EtcdDiskClaim(vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Made once and never changed; a claim left from an earlier try is the VM's own.
	if err := r.Client.Create(ctx, pvc); client.IgnoreAlreadyExists(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to create etcd disk claim %s: %w", pvc.Name, err)
	}
	vmtemplate.AttachEtcdDisk(vm)
	// An update, not a patch: it fails on a VM changed meanwhile (KubeVirt and CAPK
	// write it while it is new) and is tried again on the fresh one.
	switch err := r.Client.Update(ctx, vm); {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to attach etcd disk %s to VM %s: %w", pvc.Name, vm.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Attached etcd disk and started VM", "claim", pvc.Name)
	return ctrl.Result{}, nil
}
