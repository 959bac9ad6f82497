package hosted

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The Service sends the API and the agents' port to the API server pods, and the
// init container's script names the konnectivity server's user and the local port,
// not placeholders.
func TestAPIServerServiceAndCertsScript(t *testing.T) {
	g := NewWithT(t)
	in := input()
	svc := Service(in.HCP, in.Cluster)
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
	g.Expect(svc.Spec.Selector).To(Equal(in.Deployment("hash").Spec.Template.Labels))
	g.Expect(svc.Spec.Ports).To(ConsistOf(
		HaveField("Port", BeEquivalentTo(APIServerPort)), HaveField("Port", BeEquivalentTo(KonnectivityPort))))

	d := in.Deployment("hash")
	g.Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero(), "an old pod goes only once a new one serves")
	script := d.Spec.Template.Spec.InitContainers[0].Command[2]
	g.Expect(script).To(HavePrefix("set -eu\n"), "the shared preparation first")
	g.Expect(script).To(ContainSubstring("--client-name system:konnectivity-server >"))
	g.Expect(script).To(ContainSubstring("server: https://127.0.0.1:6443#"))
	rest := strings.NewReplacer("@POD_IP@", "", "@POD_NAME@", "").Replace(script)
	g.Expect(rest).NotTo(ContainSubstring("@"), "a placeholder left unfilled")
}
