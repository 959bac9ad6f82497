package kubever

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestNodeVersions(t *testing.T) {
	g := NewWithT(t)
	known := ParseNodeVersions(" v1.34.4  v1.35.4\n")
	g.Expect(known).To(Equal([]string{"v1.34.4", "v1.35.4"}))
	g.Expect(ParseNodeVersions("")).To(BeEmpty())
	g.Expect(HasNodeImage(known, "v1.35.4")).To(BeTrue())
	g.Expect(HasNodeImage(known, "v1.36.0")).To(BeFalse())
	g.Expect(HasNodeImage(known, "1.35.4")).To(BeFalse(), "versions are compared as the API server's policy compares them: exactly")

	// The controller's admission policy says the same; keep the two in step.
	g.Expect(NoNodeImageMessage("v1.36.0", known)).To(Equal(
		"Kubernetes v1.36.0 has no knest node image on this host (node images: v1.34.4 v1.35.4); build and publish one first (images/README.md)"))
	g.Expect(NoNodeImageMessage("v1.36.0", nil)).To(ContainSubstring("(node images: none)"))
	g.Expect([]string{NodeVersionsNamespace, NodeVersionsConfigMap, NodeVersionsKey}).To(Equal([]string{"knest-system", "knest-node-versions", "versions"}))
}

func TestCheckUpgradeAndSkew(t *testing.T) {
	g := NewWithT(t)
	v := func(s string) Version {
		out, err := Parse(s)
		g.Expect(err).NotTo(HaveOccurred())
		return out
	}
	g.Expect(CheckUpgrade(v("v1.34.4"), v("v1.35.0"))).To(Succeed())
	g.Expect(CheckUpgrade(v("v1.34.4"), v("v1.34.4"))).To(Succeed())
	g.Expect(CheckUpgrade(v("v1.34.4"), v("v1.34.3"))).To(MatchError(ContainSubstring(DowngradeMessage)))
	g.Expect(CheckUpgrade(v("v1.34.4"), v("v1.36.0"))).To(MatchError(ContainSubstring(SkipMinorMessage)))
	g.Expect(CheckPoolSkew(v("v1.32.0"), v("v1.35.4"))).To(Succeed())
	g.Expect(CheckPoolSkew(v("v1.31.9"), v("v1.35.4"))).To(MatchError(ContainSubstring(PoolSkewMessage)))
	g.Expect(CheckPoolSkew(v("v1.35.5"), v("v1.35.4"))).To(MatchError(ContainSubstring(PoolSkewMessage)))
	_, err := Parse("1.35.4")
	g.Expect(err).To(HaveOccurred())
}
