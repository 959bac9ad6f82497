package kubever

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	g := NewWithT(t)
	v, err := Parse("v1.35.4")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(Version{Minor: 35, Patch: 4}))
	g.Expect(v.String()).To(Equal("v1.35.4"))
	for _, bad := range []string{"", "1.35.4", "v1.35", "v2.0.0", "v1.35.04", "v1.35.4-rc.1", "v1.035.4"} {
		_, err := Parse(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

func TestCompareAndOlder(t *testing.T) {
	g := NewWithT(t)
	a, b, c := Version{34, 4}, Version{35, 0}, Version{35, 4}
	g.Expect(a.Compare(b)).To(Equal(-1))
	g.Expect(c.Compare(b)).To(Equal(1))
	g.Expect(c.Compare(c)).To(Equal(0))
	g.Expect(Older("v1.35.4", "v1.34.10")).To(Equal("v1.34.10"), "minors compare as numbers")
	g.Expect(Older("v1.34.9", "v1.34.10")).To(Equal("v1.34.9"), "patches compare as numbers")
	g.Expect(Older("typo", "v1.35.4")).To(Equal("v1.35.4"))
	g.Expect(Older("v1.35.4", "typo")).To(Equal("v1.35.4"))
}

func TestUpgradeAndSkewRules(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CheckUpgrade(Version{34, 4}, Version{35, 4})).To(Succeed())
	g.Expect(CheckUpgrade(Version{35, 4}, Version{35, 4})).To(Succeed())
	g.Expect(CheckUpgrade(Version{35, 4}, Version{35, 3})).To(MatchError(ContainSubstring(DowngradeMessage)))
	g.Expect(CheckUpgrade(Version{34, 4}, Version{36, 0})).To(MatchError(ContainSubstring(SkipMinorMessage)))

	g.Expect(CheckPoolSkew(Version{32, 0}, Version{35, 4})).To(Succeed())
	g.Expect(CheckPoolSkew(Version{35, 4}, Version{35, 4})).To(Succeed())
	g.Expect(CheckPoolSkew(Version{31, 9}, Version{35, 4})).To(MatchError(ContainSubstring(PoolSkewMessage)))
	g.Expect(CheckPoolSkew(Version{35, 5}, Version{35, 4})).To(MatchError(ContainSubstring(PoolSkewMessage)))
}

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

func TestNewMachinesBlocked(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NewMachinesBlocked("v1.34.4", "v1.35.4")).To(BeTrue(), "one minor behind: kubeadm joins only at the control plane's minor")
	g.Expect(NewMachinesBlocked("v1.32.0", "v1.35.4")).To(BeTrue())
	g.Expect(NewMachinesBlocked("v1.35.3", "v1.35.4")).To(BeFalse(), "an older patch of the same minor joins")
	g.Expect(NewMachinesBlocked("v1.35.4", "v1.35.4")).To(BeFalse())
	g.Expect(NewMachinesBlocked("", "v1.35.4")).To(BeFalse())
	g.Expect(NewMachinesBlocked("v1.34.4", "")).To(BeFalse())
}
