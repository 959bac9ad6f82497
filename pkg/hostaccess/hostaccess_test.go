package hostaccess_test

import (
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knest-dev/knest/pkg/hostaccess"
)

func TestRenderBindsTheRoleToTheServiceAccount(t *testing.T) {
	g := NewWithT(t)
	meta := metav1.ObjectMeta{Name: "a-ccm", Namespace: "t1", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "a"}}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}}
	o := hostaccess.Render(meta, "ccm", rules)

	g.Expect(o.List()).To(HaveLen(3))
	for _, obj := range o.List() {
		g.Expect(obj.GetName()).To(Equal("a-ccm"))
		g.Expect(obj.GetNamespace()).To(Equal("t1"))
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "a"))
	}
	g.Expect(o.Role.Rules).To(Equal(rules))
	g.Expect(o.RoleBinding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "a-ccm"}))
	g.Expect(o.RoleBinding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "a-ccm", Namespace: "t1"}))
	// Only the binding is marked, and the caller's labels are not written to.
	g.Expect(o.RoleBinding.Labels).To(HaveKeyWithValue(hostaccess.Label, "ccm"))
	g.Expect(o.ServiceAccount.Labels).NotTo(HaveKey(hostaccess.Label))
	g.Expect(o.Role.Labels).NotTo(HaveKey(hostaccess.Label))
	g.Expect(meta.Labels).NotTo(HaveKey(hostaccess.Label))
}
