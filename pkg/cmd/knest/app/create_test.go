package app_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

func TestCreateWithoutWait(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	r := knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "2", "--pool", "gpu=0")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty(), "progress goes to stderr")
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo created in namespace " + ns))
	g.Expect(r.stderr).To(ContainSubstring("knest get demo -n " + ns))

	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.Workers).To(HaveLen(2))
	g.Expect(*nc.Spec.Workers[0].Replicas).To(Equal(int32(2)))
	g.Expect(*nc.Spec.Workers[1].Replicas).To(Equal(int32(0)))

	// What --dry-run prints is what the API server stores (its defaults included).
	dry := knest(t, "", "create", "demo", "-n", ns, "--dry-run", "--workers", "2", "--pool", "gpu=0")
	g.Expect(dry.err).NotTo(HaveOccurred())
	fromDryRun := &knestv1.NestedCluster{}
	g.Expect(yaml.UnmarshalStrict([]byte(dry.stdout), fromDryRun)).To(Succeed())
	g.Expect(fromDryRun.Spec).To(Equal(nc.Spec))
}

func TestCreateFromManifestOnStdin(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	manifest := "apiVersion: knest.dev/v1alpha1\nkind: NestedCluster\nmetadata:\n  name: fromfile\nspec:\n  controlPlane:\n    replicas: 3\n  workers:\n  - name: big\n    replicas: 4\n    memory: 16Gi\n"
	r := knest(t, manifest, "create", "-f", "-", "-n", ns, "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	nc := getCluster(g, t.Context(), ns, "fromfile")
	g.Expect(nc.Spec.ControlPlane.Replicas).To(Equal(int32(3)))
	g.Expect(nc.Spec.Workers[0].Memory.String()).To(Equal("16Gi"))
	g.Expect(nc.Spec.Workers[0].CPU).To(Equal(int32(2)), "defaulted by the API server")
}

// What Create waits for and says on the way is pkg/knest's (create_test.go there);
// here, that --timeout reaches the wait and what the command prints around it.

func TestCreateWaitEndsWithHowToGetTheKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)

	run := start(t, "", "create", "demo", "-n", ns, "--workers", "2", "--timeout", "1m")
	eventuallyCluster(t, ns, "demo")
	setStatus(t, ns, "demo", knesttest.Ready)

	r := run.wait()
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty())
	g.Expect(r.stderr).To(MatchRegexp(`(?s)✓ cluster demo is ready.*knest kubeconfig demo -n ` + ns))
}

func TestCreateTimesOutWithoutController(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := knest(t, "", "create", "demo", "-n", ns, "--timeout", "2s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be ready: the knest controller has not reported any status for it; is the controller running on the host cluster?")))
	g.Expect(r.stderr).To(ContainSubstring("✗ cluster demo is not ready after 2s"))
	g.Expect(r.stderr).To(ContainSubstring("\nERROR: timed out after 2s"))
	g.Expect(strings.Count(r.stderr, "ERROR")).To(Equal(1))
	g.Expect(r.stdout).To(BeEmpty())
}
