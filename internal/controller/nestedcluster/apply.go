package nestedcluster

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// appliedHashAnnotation records the hash of what knest last applied to an object.
// An object whose annotation matches the desired hash is not applied again, so a
// NestedCluster at rest costs no API writes. The trade-off: an edit by someone else
// that leaves the annotation alone is not reverted until the spec changes.
const appliedHashAnnotation = "knest.dev/applied-hash"

// apply server-side applies desired (owned by nc) unless the cached object already
// carries the same applied hash. It reports whether it wrote.
func (r *Reconciler) apply(ctx context.Context, nc *knestv1.NestedCluster, desired client.Object) (bool, error) {
	setOwner := controllerutil.SetControllerReference
	if ControlledByCluster(desired) {
		setOwner = controllerutil.SetOwnerReference
	}
	if err := setOwner(nc, desired, r.Client.Scheme()); err != nil {
		return false, err
	}
	u, err := toApplyConfiguration(desired, r.Client.Scheme())
	if err != nil {
		return false, err
	}
	hash, err := cluster.ContentHash(u.Object)
	if err != nil {
		return false, err
	}

	current := desired.DeepCopyObject().(client.Object)
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), current); {
	case err == nil:
		if !ownedBy(current, nc) {
			return false, &NotOwnedError{Kind: u.GetKind(), Name: u.GetName(), Cluster: nc.Name}
		}
		if current.GetAnnotations()[appliedHashAnnotation] == hash {
			return false, nil
		}
	case !apierrors.IsNotFound(err):
		return false, err
	}

	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[appliedHashAnnotation] = hash
	u.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, u, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return true, nil
}

// NotOwnedError is an object knest would create that already exists without the
// NestedCluster among its owners: someone else's, which knest neither overwrites nor
// (by garbage collection, once it owned it) deletes.
type NotOwnedError struct {
	Kind, Name, Cluster string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s already exists and does not belong to NestedCluster %s; knest does not take over objects it did not create: delete or rename that %s, or give the cluster another name",
		e.Kind, e.Name, e.Cluster, e.Kind)
}

func ownedBy(obj client.Object, nc *knestv1.NestedCluster) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == nc.UID {
			return true
		}
	}
	return false
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

// toApplyConfiguration turns a typed object into the unstructured form server-side
// apply wants: no status (other controllers own it), no zero creationTimestamp and
// no empty endpoint (they would be owned fields). It goes through encoding/json because Cluster API's
// v1beta2 types rely on `omitzero`, which the runtime's unstructured converter
// ignores (it would send empty structs the schemas reject).
func toApplyConfiguration(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if kc, ok := obj.(*capkv1.KubevirtCluster); ok && kc.Spec.ControlPlaneEndpoint == (capkv1.APIEndpoint{}) {
		// CAPK writes the endpoint from its Service unless knest fixes one (apiServer.host).
		// The struct has no omitempty fields: applying it empty would own, and on every
		// later apply force back, host "" and port 0.
		unstructured.RemoveNestedField(u.Object, "spec", "controlPlaneEndpoint")
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
