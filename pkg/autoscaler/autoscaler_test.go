package autoscaler

import (
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hostaccess"
)

// The image the controller runs by default is the one hack/autoscaler.mk builds
// from the module the tools go.mod pins: its tag ends with that commit.
func TestDefaultImageIsTheBuiltOne(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../hack/tools/autoscaler/go.mod")
	g.Expect(err).NotTo(HaveOccurred())
	var version string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "k8s.io/autoscaler/cluster-autoscaler" {
			version = f[1]
		}
	}
	g.Expect(version).NotTo(BeEmpty())
	commit := version[strings.LastIndex(version, "-")+1:]
	g.Expect(DefaultImage).To(ContainSubstring("-"+commit+"-knest."), "pkg/autoscaler.DefaultImage and hack/tools/autoscaler/go.mod (%s)", version)
	mk, err := os.ReadFile("../../hack/autoscaler.mk")
	g.Expect(err).NotTo(HaveOccurred())
	fixes := DefaultImage[strings.LastIndex(DefaultImage, "-knest."):]
	g.Expect(string(mk)).To(ContainSubstring(")"+fixes+"\n"), "hack/autoscaler.mk builds %s", fixes)
}

func TestRender(t *testing.T) {
	g := NewWithT(t)
	o := Render(Input{
		Cluster: "demo", Namespace: "tenants", MachineDeployments: []string{"demo-burst"},
		KubeconfigSecret: "demo-kubeconfig",
		Spec:             knestv1.AutoscalerSpec{ScaleDownUnneededTime: &metav1.Duration{Duration: time.Minute}},
		Labels:           map[string]string{knestv1.ClusterNameLabel: "demo"},
	})
	c := o.Deployment.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(DefaultImage))
	g.Expect(c.Args).To(ContainElements(
		"--node-group-auto-discovery=clusterapi:namespace=tenants,clusterName=demo",
		"--clusterapi-cloud-config-authoritative",
		"--scale-down-unneeded-time=1m0s",
		"--scale-down-delay-after-add=10m0s",
		"--unremovable-node-recheck-timeout=1m0s",
	))
	// The management side is in-cluster: the workload kubeconfig must not be taken for it.
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--cloud-config")))
	g.Expect(c.Env).To(ContainElement(HaveField("Value", "v1beta1")))
	g.Expect(o.Deployment.Spec.Template.Spec.ServiceAccountName).To(Equal(o.ServiceAccount.Name))
	g.Expect(o.Deployment.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "cluster-autoscaler", knestv1.ClusterNameLabel: "demo"}))
	g.Expect(o.Deployment.Spec.Template.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "demo"))
	g.Expect(*o.Deployment.Spec.Template.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(c.Resources.Limits.Memory().IsZero()).To(BeFalse())

	// Scaling, by name only; nothing cluster-wide, nothing to delete.
	var scale []rbacv1.PolicyRule
	for _, r := range o.Role.Rules {
		g.Expect(r.Verbs).NotTo(ContainElements("delete", "create", "*"))
		if len(r.Resources) == 1 && r.Resources[0] == "machinedeployments/scale" {
			scale = append(scale, r)
		}
	}
	g.Expect(scale).To(HaveLen(1))
	g.Expect(scale[0].ResourceNames).To(Equal([]string{"demo-burst"}))
	g.Expect(o.RoleBinding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "demo-autoscaler"}))
	g.Expect(o.RoleBinding.Labels).To(HaveKeyWithValue(hostaccess.Label, "autoscaler"))
}
