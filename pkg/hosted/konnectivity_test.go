package hosted

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Each API server pod has a konnectivity server that counts its peers, and the
// agent in the tenant dials the tenant's endpoint.
func TestKonnectivity(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.HCP.Spec.Replicas = ptr.To[int32](3)
	var server []string
	for _, c := range in.Deployment("hash").Spec.Template.Spec.Containers {
		if c.Name == "konnectivity-server" {
			server = c.Command
		}
	}
	g.Expect(server).To(ContainElements("--server-count=3", "--uds-name="+konnectivitySocket))

	cm, crs, err := in.Konnectivity()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crs.Spec.Resources).To(ConsistOf(HaveField("Name", cm.Name)))
	docs := strings.Split(cm.Data[agentManifest], "---\n")
	g.Expect(docs).To(HaveLen(3))
	var ds appsv1.DaemonSet
	g.Expect(yaml.Unmarshal([]byte(docs[2]), &ds)).To(Succeed())
	g.Expect(ds.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--proxy-server-host=" + in.ServiceIP))
}
