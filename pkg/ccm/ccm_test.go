package ccm_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/pkg/ccm"
	"github.com/knest-dev/knest/pkg/hostaccess"
)

func TestRender(t *testing.T) {
	g := NewWithT(t)
	o := ccm.Render(ccm.Input{Cluster: "web", Namespace: "tenants", Image: "knest:dev", KubeconfigSecret: "web-kubeconfig",
		Labels: map[string]string{"knest.dev/cluster": "web"}})
	for _, obj := range o.List() {
		g.Expect(obj.GetName()).To(Equal("web-cloud-controller-manager"))
		g.Expect(obj.GetNamespace()).To(Equal("tenants"))
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue("knest.dev/cluster", "web"))
	}
	g.Expect(o.RoleBinding.Labels).To(HaveKeyWithValue(hostaccess.Label, "cloud-controller-manager"), "the controller caches it")
	g.Expect(o.ServiceAccount.Labels).NotTo(HaveKey(hostaccess.Label))

	d := o.Deployment
	g.Expect(d.Spec.Template.Labels).NotTo(BeIdenticalTo(d.Labels))
	g.Expect(d.Spec.Selector.MatchLabels).To(HaveKeyWithValue("knest.dev/cluster", "web"))
	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal("web-cloud-controller-manager"))
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal("knest:dev"))
	g.Expect(c.Args).To(Equal([]string{"cloud-controller-manager", "--cluster=web", "--namespace=tenants", "--tenant-kubeconfig=/etc/knest/tenant/value"}))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(pod.Volumes[0].Secret.SecretName).To(Equal("web-kubeconfig"))
}
