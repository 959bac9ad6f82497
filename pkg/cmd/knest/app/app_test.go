package app_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/pkg/cmd/knest/version"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

func TestQuietAndVerbose(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	r := knest(t, "", "create", "demo", "-n", ns, "--wait=false", "-q")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.stderr).To(BeEmpty(), "-q prints no progress")

	r = knest(t, "", "get", "nope", "-n", ns, "-q")
	g.Expect(r.err).To(HaveOccurred())
	g.Expect(r.stderr).To(BeEmpty(), "-q prints no error either; the exit code tells")

	r = knest(t, "", "list", "-n", ns, "-q", "-o", "name")
	g.Expect(r.stdout).To(Equal("nestedcluster.knest.dev/demo\n"), "data still goes to stdout")

	// An API error: one ERROR line; the API status only with -v.
	r = knest(t, "", "create", "demo", "-n", "no-such-namespace", "--wait=false")
	g.Expect(knesttest.Lines(r.stderr)).To(Equal([]string{`ERROR: failed to create cluster demo: namespace no-such-namespace does not exist; create it first (kubectl create namespace no-such-namespace) or pick another with -n: namespaces "no-such-namespace" not found`}))
	r = knest(t, "", "create", "demo", "-n", "no-such-namespace", "--wait=false", "-v", "1")
	g.Expect(knesttest.Lines(r.stderr)).To(ContainElement(`DEBUG: API status: code 404, reason NotFound: namespaces "no-such-namespace" not found`))
	g.Expect(strings.Count(r.stderr, "ERROR")).To(Equal(1))

	manifest := "apiVersion: knest.dev/v1alpha1\nkind: NestedCluster\nmetadata:\n  name: demo2\nspec:\n  apiServer:\n    serviceType: ClusterIP\n"
	g.Expect(knest(t, manifest, "create", "-f", "-", "-n", ns, "--wait=false").err).To(Succeed())
	r = knest(t, "", "scale", "demo2", "-n", ns, "--workers", "1", "--wait=false")
	g.Expect(r.err).To(MatchError(ContainSubstring("the cluster has no worker pools to scale")))

	r = knest(t, "", "get", "demo", "-n", ns, "-v", "1")
	g.Expect(r.err).NotTo(HaveOccurred())

	r = knest(t, "", "version")
	g.Expect(r.stdout).To(Equal(version.DisplayVersion() + "\n"))
	r = knest(t, "", "version", "-q")
	g.Expect(r.stdout).To(Equal(version.Version() + "\n"))

	r = knest(t, "", "completion", "bash")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.stdout).To(ContainSubstring("bash completion V2 for knest"))

	r = knest(t, "", "frobnicate")
	g.Expect(r.err).To(MatchError(ContainSubstring(`unknown command "frobnicate" for "knest"`)))
	g.Expect(strings.Count(r.stderr, "ERROR")).To(Equal(1))
}
