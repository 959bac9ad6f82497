// Package hostaccess renders a tenant's component on the host, in the tenant's
// namespace: the identity it runs as (a ServiceAccount, a Role and a RoleBinding
// marked with Label) and its one-replica Deployment, which reaches the tenant through
// the tenant's admin kubeconfig. The autoscaler, the cloud controller manager and the
// CSI controller are such components.
package hostaccess

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Label marks the components' RoleBindings, as it does the controller's own in each
// tenant namespace: the controller caches only RoleBindings with it. Its value
// names the component.
const Label = "knest.dev/tenant-access"

// Objects are a component's ServiceAccount, Role and RoleBinding, all of one name.
type Objects struct {
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	RoleBinding    *rbacv1.RoleBinding
}

// List is the objects in the order a fresh apply creates them.
func (o Objects) List() []client.Object {
	return []client.Object{o.ServiceAccount, o.Role, o.RoleBinding}
}

// Render returns the identity named meta.Name in meta.Namespace, with meta's labels
// on each object (copied), Label=component on the RoleBinding, and rules in the Role.
func Render(meta metav1.ObjectMeta, component string, rules []rbacv1.PolicyRule) Objects {
	copyMeta := func() metav1.ObjectMeta {
		m := *meta.DeepCopy()
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		return m
	}
	bindingMeta := copyMeta()
	bindingMeta.Labels[Label] = component
	return Objects{
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: copyMeta(),
		},
		Role: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: copyMeta(),
			Rules:      rules,
		},
		RoleBinding: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: bindingMeta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: meta.Name, Namespace: meta.Namespace}},
		},
	}
}
