package hosted

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
)

func input() Input {
	return Input{
		HCP: &hcpv1.HostedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Name: "demo-cp", Namespace: "team-a"},
			Spec: hcpv1.HostedControlPlaneSpec{Version: "v1.35.4", Replicas: ptr.To[int32](1),
				Network: hcpv1.NetworkSpec{PodCIDR: "10.243.0.0/16", ServiceCIDR: "10.95.0.0/16", DNSDomain: "tenant.local"}},
		},
		Cluster: "demo", ServiceIP: "10.96.7.8",
	}
}

// The API server pod and the kubeadm Job run to the restricted Pod Security
// Standard, their keys in memory.
func TestPodsAreRestricted(t *testing.T) {
	g := NewWithT(t)
	in := input()
	for name, spec := range map[string]corev1.PodSpec{
		"API server": in.Deployment("hash").Spec.Template.Spec,
		"kubeadm":    in.Job("hash").Spec.Template.Spec,
	} {
		g.Expect(spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), name)
		g.Expect(spec.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(nonRootUser)), name)
		g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), name)
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			g.Expect(c.SecurityContext).NotTo(BeNil(), c.Name)
			g.Expect(c.SecurityContext.RunAsUser).To(BeNil(), "%s: the pod's user, not its own", c.Name)
			g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty(), c.Name)
			g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		}
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.Name != "konnectivity" { // a socket
				g.Expect(v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory), "%s: %s", name, v.Name)
			}
		}
	}
}
