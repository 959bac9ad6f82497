package nestedcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hostaccess"
)

// The controller's cluster-wide role reads (never Secrets) and writes Cluster API's
// and knest's own kinds. What it writes beside them in a tenant's namespace
// (Secrets, workloads, volumes, policies) comes from ClusterRole knest-tenant
// (config/rbac/tenant_role.yaml), which it binds to itself in each namespace a host
// admin labelled knest.dev/tenants=true. The admission policy knest-controller-fence
// (config/admission) refuses its writes outside such namespaces and any binding
// but that one, so a stolen token of it cannot reach further.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=knest-tenant

const (
	// TenantRole is the ClusterRole bound in each tenant namespace.
	TenantRole = "knest-tenant"
	// AccessBindingName is the RoleBinding that binds it there.
	AccessBindingName = "knest-controller"
	// AccessBindingLabel marks that RoleBinding, and the autoscalers' (the cache
	// holds only these).
	AccessBindingLabel = hostaccess.Label
)

// NamespaceNotEnabledError is a NestedCluster in a namespace that is not labelled
// knest.dev/tenants=true: knest creates nothing there.
type NamespaceNotEnabledError struct{ Namespace string }

func (e *NamespaceNotEnabledError) Error() string {
	return knestv1.NamespaceNotEnabledMessage(e.Namespace)
}

// SubjectFor is the RBAC subject of an authenticated user name: a ServiceAccount
// for system:serviceaccount:NAMESPACE:NAME, a User otherwise.
func SubjectFor(username string) rbacv1.Subject {
	if ns, name, err := serviceaccount.SplitUsername(username); err == nil {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: username}
}

// ensureAccess checks that ns is a tenant namespace and binds knest-tenant there to
// the controller's own identity (r.Self). It writes only when the binding differs.
func (r *Reconciler) ensureAccess(ctx context.Context, ns string) error {
	if err := TenantNamespace(ctx, r.Client, ns); err != nil {
		return err
	}
	desired := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: AccessBindingName, Labels: map[string]string{AccessBindingLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TenantRole},
		Subjects:   []rbacv1.Subject{r.Self},
	}
	current := &rbacv1.RoleBinding{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), current); {
	case err == nil:
		if equality.Semantic.DeepEqual(current.RoleRef, desired.RoleRef) && equality.Semantic.DeepEqual(current.Subjects, desired.Subjects) {
			return nil
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to bind ClusterRole %s in namespace %s: %w", TenantRole, ns, err)
	}
	return nil
}

// TenantNamespace returns a NamespaceNotEnabledError unless namespace ns is
// labelled knest.dev/tenants=true.
func TenantNamespace(ctx context.Context, c client.Reader, ns string) error {
	n := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return err
	}
	if n.Labels[knestv1.TenantNamespaceLabel] != "true" {
		return &NamespaceNotEnabledError{Namespace: ns}
	}
	return nil
}

// WatchTenantNamespaces makes a controller of NestedClusters reconcile those of a
// namespace whose labels change, so that enabling a namespace resumes them.
func WatchTenantNamespaces(b *builder.Builder, c client.Reader) *builder.Builder {
	return b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &knestv1.NestedClusterList{}
		if err := c.List(ctx, list, client.InNamespace(obj.GetName())); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}), builder.WithPredicates(predicate.LabelChangedPredicate{}))
}
