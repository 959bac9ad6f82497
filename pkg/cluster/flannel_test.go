package cluster_test

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/knest-dev/knest/pkg/cluster"
)

func TestFlannelManifestUsesPodCIDRAndPort(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Network.PodCIDR = "10.200.0.0/16"
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	manifest := graph.CNIConfigMap.Data["flannel.yaml"]
	g.Expect(manifest).To(ContainSubstring(`"Network":"10.200.0.0/16"`))
	g.Expect(manifest).To(ContainSubstring(`"Port":8473`))
	g.Expect(manifest).To(ContainSubstring(cluster.FlannelImage))
	var ds map[string]any
	docs := splitDocs(manifest)
	g.Expect(docs).To(HaveLen(6))
	g.Expect(yaml.Unmarshal([]byte(docs[5]), &ds)).To(Succeed())
	g.Expect(ds["kind"]).To(Equal("DaemonSet"))
}

func splitDocs(s string) []string {
	var out []string
	for _, d := range regexpDocs.Split(s, -1) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

var regexpDocs = regexp.MustCompile(`(?m)^---\n`)
