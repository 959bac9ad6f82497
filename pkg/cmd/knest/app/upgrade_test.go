package app_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/kubever"
)

// What knest upgrade does with a request (its rules, node images, the wait that
// reports each machine) is pkg/knest's (upgrade_test.go there); here, that the flags
// make the request and what the command prints.

func TestUpgradeFlagsMakeTheRequest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--version", "v1.32.4", "--workers", "2", "--pool", "gpu=1").err).To(Succeed())

	r := knest(t, "", "upgrade", "demo", "-n", ns, "--version", "1.33.0", "--hold-pool", "gpu", "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(knesttest.Lines(r.stderr)).To(ContainElement("✓ cluster demo upgrading: control plane v1.32.4 -> v1.33.0, pool gpu held at v1.32.4"))
	g.Expect(r.stderr).To(ContainSubstring("Follow it with:\n  knest get demo -n " + ns))
	g.Expect(r.stdout).To(BeEmpty(), "no node table without --wait")
	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.Version).To(Equal("v1.33.0"))
	g.Expect(nc.Spec.Workers[1].Version).To(Equal("v1.32.4"))

	r = knest(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.33.0", "--release-pool", "gpu", "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(getCluster(g, t.Context(), ns, "demo").Spec.Workers[1].Version).To(BeEmpty())
}

func TestUpgradeRefusesBadFlags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--version", "v1.34.4", "--workers", "1").err).To(Succeed())
	before := getCluster(g, t.Context(), ns, "demo")

	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"--version", "v1.37.0"}, want: "--version v1.37.0: " + kubever.RangeMessage},
		{args: []string{}, want: "--version is required: the Kubernetes version to upgrade to, e.g. " + knestv1.DefaultVersion},
		{args: []string{"--version", "1.35.4", "--timeout", "0s"}, want: "--timeout must be positive"},
		// Refused by pkg/knest; the command prints it once, as an error.
		{args: []string{"--version", "1.36.0"}, want: "cannot upgrade cluster demo: spec.version: Invalid value: \"v1.36.0\": " + kubever.SkipMinorMessage},
	}
	for _, tt := range tests {
		r := knest(t, "", append([]string{"upgrade", "demo", "-n", ns}, tt.args...)...)
		g.Expect(r.err).To(MatchError(ContainSubstring(tt.want)), "args %v", tt.args)
		g.Expect(r.stderr).To(HavePrefix("ERROR: "), "args %v", tt.args)
		g.Expect(strings.Count(r.stderr, "ERROR")).To(Equal(1), "args %v", tt.args)
	}
	g.Expect(getCluster(g, t.Context(), ns, "demo").Generation).To(Equal(before.Generation))
}

// readyMachine creates a Cluster API Machine of the cluster's pool at version whose
// Node joined and is Ready, as Cluster API leaves it after an upgrade.
func readyMachine(t *testing.T, ns, clusterName, pool, name, version string) {
	t.Helper()
	knesttest.CreateMachine(t, env.Client, ns, clusterName, pool, name, version)
	knesttest.JoinNode(t, env.Client, ns, name, true)
}

// With --wait the command ends with the versions the nodes run, on stdout; a wait
// that times out prints none.
func TestUpgradeWaitPrintsNodeVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--version", "v1.34.4", "--workers", "1").err).To(Succeed())
	setStatus(t, ns, "demo", knesttest.Ready)
	readyMachine(t, ns, "demo", "workers", "demo-workers-new", "v1.35.4")
	readyMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-new", "v1.35.4")
	readyMachine(t, ns, "other", "workers", "other-workers-new", "v1.35.4")

	run := start(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.35.4", "--timeout", "1m")
	g.Eventually(func() string { return getCluster(g, t.Context(), ns, "demo").Spec.Version }, 10*time.Second).Should(Equal("v1.35.4"))
	setStatus(t, ns, "demo", knesttest.Ready)
	r := run.wait()
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	//nolint:dupword // a node is named after its machine, as CAPK names it
	g.Expect(rows(r.stdout)).To(Equal([]string{
		"POOL MACHINE NODE KUBELET",
		"control-plane demo-cp-new demo-cp-new v1.35.4",
		"workers demo-workers-new demo-workers-new v1.35.4",
	}))

	r = knest(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.36.0", "--timeout", "2s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be ready")))
	g.Expect(r.stderr).To(ContainSubstring("\nERROR: timed out after 2s"))
	g.Expect(r.stdout).To(BeEmpty())
}

func TestGetShowsDifferingVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--version", "v1.34.4", "--workers", "2", "--pool", "gpu=1").err).To(Succeed())
	g.Expect(knest(t, "", "upgrade", "demo", "-n", ns, "--version", "v1.35.4", "--hold-pool", "gpu", "--wait=false").err).To(Succeed())

	// The control plane rolls: one of two machines up to date, the oldest at v1.34.4.
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		knesttest.Ready(nc)
		nc.Status.Phase = knestv1.PhaseUpgrading
		nc.Status.Version = "v1.34.4"
		nc.Status.ControlPlane.Current, nc.Status.ControlPlane.UpToDate = 2, 1
		nc.Status.Workers[0].Version = "v1.34.4"
	})
	r := knest(t, "", "get", "demo", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(rows(r.stdout)).To(ContainElements(
		"Version: v1.34.4 → v1.35.4",
		"POOL DESIRED READY UP-TO-DATE VERSION CPU MEMORY ROOT DISK IMAGE",
		"control-plane 1 1 1 v1.34.4 → v1.35.4 2 4Gi ContainerDisk <default>",
		"workers 2 2 2 v1.34.4 → v1.35.4 2 4Gi ContainerDisk <default>",
		"gpu 1 1 1 v1.34.4 (held) 2 4Gi ContainerDisk <default>",
		"Versions:",
		"control plane upgrading: runs v1.34.4, rolling to v1.35.4",
		"control plane rolling: 1 of 2 up to date",
		"pool gpu is held at v1.34.4, the control plane's version; it stays there when the cluster is upgraded",
	))
	r = knest(t, "", "list", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(rows(r.stdout)[1]).To(HavePrefix("demo Upgrading v1.34.4 → v1.35.4 1/1 "))

	// The control plane is done; the default pool rolls; gpu stays behind.
	setStatus(t, ns, "demo", func(nc *knestv1.NestedCluster) {
		knesttest.Ready(nc)
		nc.Status.Phase = knestv1.PhaseUpgrading
		nc.Status.Workers[0].Current, nc.Status.Workers[0].UpToDate = 3, 1
	})
	r = knest(t, "", "get", "demo", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(rows(r.stdout)).To(ContainElements(
		"Version: v1.35.4",
		"control-plane 1 1 1 v1.35.4 2 4Gi ContainerDisk <default>",
		"workers 2 2 1 v1.35.4 2 4Gi ContainerDisk <default>",
		"gpu 1 1 1 v1.34.4 (held) 2 4Gi ContainerDisk <default>",
		"Versions:",
		"pool workers rolling: 1 of 3 up to date",
		"pool gpu is held at v1.34.4; control plane runs v1.35.4",
	))
	r = knest(t, "", "list", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(rows(r.stdout)[1]).To(HavePrefix("demo Upgrading v1.35.4, pool gpu v1.34.4 1/1 "))
	g.Expect(r.stdout).NotTo(ContainSubstring("control plane rolling"))
}
