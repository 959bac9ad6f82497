package nestedcluster

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/internal/tenant"
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
	if err := tenant.CheckNamespace(ctx, r.Client, ns); err != nil {
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
	s := desired.Subjects[0]
	ac := rbacv1ac.RoleBinding(desired.Name, desired.Namespace).WithLabels(desired.Labels).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(desired.RoleRef.APIGroup).WithKind(desired.RoleRef.Kind).WithName(desired.RoleRef.Name)).
		WithSubjects(rbacv1ac.Subject().WithKind(s.Kind).WithAPIGroup(s.APIGroup).WithNamespace(s.Namespace).WithName(s.Name))
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to bind ClusterRole %s in namespace %s: %w", TenantRole, ns, err)
	}
	return nil
}
