package knest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/upgrade"
)

// createAt creates NestedCluster name at Kubernetes version with pools of the given
// sizes, in order.
func createAt(t *testing.T, ns, name, version string, pools ...knestv1.WorkerPool) client.ObjectKey {
	t.Helper()
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: knestv1.NestedClusterSpec{Version: version, Workers: pools}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), nc)).To(Succeed())
	return client.ObjectKeyFromObject(nc)
}

// versions is spec.version ("") and every pool's version.
func versions(nc *knestv1.NestedCluster) map[string]string {
	out := map[string]string{"": nc.Spec.Version}
	for _, p := range nc.Spec.Workers {
		out[p.Name] = p.Version
	}
	return out
}

// serverRefuses sends the change straight to the API server and returns its error.
func serverRefuses(t *testing.T, key client.ObjectKey, mutate func(*knestv1.NestedCluster)) error {
	t.Helper()
	nc := getCluster(NewWithT(t), t.Context(), key)
	mutate(nc)
	return env.Client.Update(t.Context(), nc)
}

func TestUpgradeRefusesWhatTheAPIServerRefuses(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", "v1.34.4", pool("workers", 1), pool("gpu", 1))
	before := getCluster(g, t.Context(), key)
	c, _ := newClient(t)

	tests := []struct {
		req  upgrade.Request
		want string
		// server is the same change sent to the API server, which must refuse it
		// with the same message, shared.
		server func(*knestv1.NestedCluster)
		shared string
	}{
		{req: upgrade.Request{Version: "v1.34.3"}, want: "cannot upgrade cluster demo: spec.version: Invalid value: \"v1.34.3\": " + kubever.DowngradeMessage,
			server: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.34.3" }, shared: kubever.DowngradeMessage},
		{req: upgrade.Request{Version: "v1.36.0"}, want: "cannot upgrade cluster demo: spec.version: Invalid value: \"v1.36.0\": " + kubever.SkipMinorMessage,
			server: func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.36.0" }, shared: kubever.SkipMinorMessage},
		{req: upgrade.Request{Version: "v1.34.4"}, want: "cluster demo already asks for v1.34.4; nothing to upgrade"},
		{req: upgrade.Request{Version: "v1.35.4", HoldPools: []string{"tpu"}}, want: `cannot upgrade cluster demo: the cluster has no worker pool "tpu"; its pools are workers, gpu`},
		{req: upgrade.Request{Version: "v1.35.4", ReleasePools: []string{"gpu"}}, want: "cannot upgrade cluster demo: pool gpu is not held: it follows spec.version (v1.34.4); release only pools held at a version of their own"},
	}
	for _, tt := range tests {
		_, err := c.Upgrade(t.Context(), key, tt.req)
		g.Expect(err).To(MatchError(tt.want), "request %+v", tt.req)
		if tt.server != nil {
			g.Expect(serverRefuses(t, key, tt.server)).To(MatchError(ContainSubstring(tt.shared)),
				"the API server says what knest says (request %+v)", tt.req)
		}
	}
	after := getCluster(g, t.Context(), key)
	g.Expect(after.Spec).To(Equal(before.Spec), "a refused upgrade changes nothing")
	g.Expect(after.Generation).To(Equal(before.Generation))

	_, err := c.Upgrade(t.Context(), client.ObjectKey{Namespace: ns, Name: "nope"}, upgrade.Request{Version: "v1.35.4"})
	g.Expect(err).To(MatchError("cluster nope not found in namespace " + ns))

	// A cluster being deleted is not upgraded.
	nc := getCluster(g, t.Context(), key)
	nc.Finalizers = append(nc.Finalizers, "test.knest.dev/keep")
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())
	t.Cleanup(func() {
		nc := &knestv1.NestedCluster{}
		if err := env.Client.Get(context.Background(), key, nc); err == nil {
			nc.Finalizers = nil
			_ = env.Client.Update(context.Background(), nc)
		}
	})
	g.Expect(env.Client.Delete(t.Context(), nc)).To(Succeed())
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.4"})
	g.Expect(err).To(MatchError("cannot upgrade cluster demo: it is being deleted"))
}

func TestUpgradeHoldsAndReleasesPools(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", "v1.32.4", pool("workers", 2), pool("gpu", 1))
	before := getCluster(g, t.Context(), key)
	c, out := newClient(t)

	_, err := c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.33.0", HoldPools: []string{"gpu"}})
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(knesttest.Lines(out.String())).To(ContainElement("✓ cluster demo upgrading: control plane v1.32.4 -> v1.33.0, pool gpu held at v1.32.4"))
	nc := getCluster(g, t.Context(), key)
	g.Expect(versions(nc)).To(Equal(map[string]string{"": "v1.33.0", "workers": "", "gpu": "v1.32.4"}))
	g.Expect(nc.Spec.Workers[1].Memory).To(Equal(before.Spec.Workers[1].Memory), "the rest of the spec is untouched")

	// A held pool not named stays held, and Upgrade says how to release it.
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.34.0"})
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(knesttest.Lines(out.String())).To(ContainElements(
		"✓ cluster demo upgrading: control plane v1.33.0 -> v1.34.0",
		"• pool gpu stays held at v1.32.4; to let it follow: knest upgrade demo -n "+ns+" --version v1.34.0 --release-pool gpu"))
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions(getCluster(g, t.Context(), key))).To(Equal(map[string]string{"": "v1.35.0", "workers": "", "gpu": "v1.32.4"}))

	// One more minor would leave gpu 4 minors behind: refused as the API server does.
	before = getCluster(g, t.Context(), key)
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.36.0"})
	g.Expect(err).To(MatchError("cannot upgrade cluster demo: spec.workers[1].version: Invalid value: \"v1.32.4\": " + kubever.PoolSkewMessage))
	g.Expect(serverRefuses(t, key, func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.36.0" })).
		To(MatchError(ContainSubstring(kubever.PoolSkewMessage)))
	g.Expect(getCluster(g, t.Context(), key).Spec).To(Equal(before.Spec))

	// Holding it again where it is changes nothing.
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.0", HoldPools: []string{"gpu"}})
	g.Expect(err).To(MatchError("cluster demo already asks for v1.35.0 and its named pools are held where they are; nothing to upgrade"))

	// Releasing at the same version is a change.
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.0", ReleasePools: []string{"gpu"}})
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(knesttest.Lines(out.String())).To(ContainElement("✓ cluster demo upgrading: pool gpu released to follow v1.35.0"))
	g.Expect(versions(getCluster(g, t.Context(), key))).To(Equal(map[string]string{"": "v1.35.0", "workers": "", "gpu": ""}))
	_, err = c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.0"})
	g.Expect(err).To(MatchError("cluster demo already asks for v1.35.0; nothing to upgrade"))
}

// publishNodeVersions plays the host: it publishes the versions with node images.
func publishNodeVersions(t *testing.T, versions string) {
	t.Helper()
	g := NewWithT(t)
	err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubever.NodeVersionsNamespace}})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: kubever.NodeVersionsNamespace, Name: kubever.NodeVersionsConfigMap},
		Data:       map[string]string{kubever.NodeVersionsKey: versions},
	}
	g.Expect(env.Client.Create(t.Context(), cm)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
}

func TestUpgradeNeedsANodeImageWhenTheHostListsThem(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	demo := createAt(t, ns, "demo", "v1.35.4", pool("workers", 1))
	old := createAt(t, ns, "old", "v1.34.4", pool("gpu", 1))
	publishNodeVersions(t, "v1.34.4 v1.35.4")
	before := getCluster(g, t.Context(), demo)
	c, out := newClientAs(t, env.Config, 1)

	_, err := c.Upgrade(t.Context(), demo, upgrade.Request{Version: "v1.36.0"})
	g.Expect(err).To(MatchError("cannot upgrade cluster demo: Kubernetes v1.36.0 has no knest node image on this host " +
		"(node images: v1.34.4 v1.35.4); build and publish one first (images/README.md)"))
	g.Expect(getCluster(g, t.Context(), demo).Spec).To(Equal(before.Spec))

	// Listed: allowed, also for a pool held at the version it runs.
	_, err = c.Upgrade(t.Context(), old, upgrade.Request{Version: "v1.35.4", HoldPools: []string{"gpu"}})
	g.Expect(err).NotTo(HaveOccurred(), out.String())

	// Without the list, every version the API server takes is allowed; the debug
	// log says so.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kubever.NodeVersionsNamespace, Name: kubever.NodeVersionsConfigMap}}
	g.Expect(env.Client.Delete(t.Context(), cm)).To(Succeed())
	_, err = c.Upgrade(t.Context(), demo, upgrade.Request{Version: "v1.36.0"})
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(out.String()).To(ContainSubstring("DEBUG: The host publishes no node image versions (no ConfigMap knest-system/knest-node-versions)"))
	g.Expect(getCluster(g, t.Context(), demo).Spec.Version).To(Equal("v1.36.0"))

	// A pool held at a version without an image is refused too.
	publishNodeVersions(t, "v1.35.4 v1.36.0")
	_, err = c.Upgrade(t.Context(), old, upgrade.Request{Version: "v1.36.0"})
	g.Expect(err).To(MatchError("cannot upgrade cluster old: pool gpu is held at v1.34.4: Kubernetes v1.34.4 has no knest node image on this host " +
		"(node images: v1.35.4 v1.36.0); build and publish one first (images/README.md)"))
}

// A tenant who may change its clusters but not read the host's node image list
// upgrades all the same; the controller's admission policy has the last word.
func TestUpgradeGoesOnWhenTheNodeImageListIsForbidden(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", "v1.35.4", pool("workers", 1))
	publishNodeVersions(t, "v1.35.4")

	kubeconfig := t.TempDir() + "/tenant.kubeconfig"
	g.Expect(env.WriteUserKubeconfig(kubeconfig, "tenant-a")).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgrade-clusters"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{knestv1.GroupVersion.Group}, Resources: []string{"nestedclusters"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machines"}, Verbs: []string{"list"}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgrade-clusters"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant-a"}},
	})).To(Succeed())

	c, out := newClientAs(t, cfg, 1)
	g.Eventually(func() error {
		_, err := c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.36.0"})
		return err
	}, 10*time.Second, 200*time.Millisecond).Should(Succeed(), "RBAC lets the tenant patch its cluster")
	g.Expect(out.String()).To(ContainSubstring("DEBUG: Cannot read the host's node image versions (ConfigMap knest-system/knest-node-versions); not checking the version against them"))
	g.Expect(getCluster(g, t.Context(), key).Spec.Version).To(Equal("v1.36.0"))
}

// upgradeMachine creates a Cluster API Machine of pool at version, as Cluster API
// would while it rolls; ready joins its Node and reports it Ready.
func upgradeMachine(t *testing.T, ns, clusterName, pool, name, version string, ready bool, finalizers ...string) {
	t.Helper()
	knesttest.CreateMachine(t, env.Client, ns, clusterName, pool, name, version, finalizers...)
	if ready {
		setMachineReady(t, ns, name)
	}
}

func setMachineReady(t *testing.T, ns, name string) {
	t.Helper()
	knesttest.JoinNode(t, env.Client, ns, name, true)
}

func deleteMachine(t *testing.T, ns, name string) {
	t.Helper()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	NewWithT(t).Expect(env.Client.Delete(t.Context(), m)).To(Succeed())
}

func countOf(lines []string, substr string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func TestUpgradeWaitsAndReportsEachMachine(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", "v1.34.4", pool("workers", 1))
	setStatus(t, key, knesttest.Ready)
	const drain = "test.knest.dev/drain"
	upgradeMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-old", "v1.34.4", true)
	upgradeMachine(t, ns, "demo", "workers", "demo-workers-old", "v1.34.4", true, drain)
	upgradeMachine(t, ns, "other", "workers", "other-workers-old", "v1.34.4", true)
	c, out := newClient(t)

	done := make(chan error, 1)
	go func() {
		// A short machine interval: every listing must still report each step once.
		_, err := c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.4"},
			knest.UpgradeWithWait(time.Minute), knest.UpgradeWithMachineInterval(500*time.Millisecond))
		done <- err
	}()
	g.Eventually(func() string { return getCluster(g, t.Context(), key).Spec.Version }, 10*time.Second).Should(Equal("v1.35.4"))
	// The old status (the previous generation, knesttest.Ready) must not end the wait.
	g.Consistently(done, time.Second).ShouldNot(Receive())

	// Cluster API surges a new control-plane machine, which joins, then removes the old.
	upgradeMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-new", "v1.35.4", false)
	g.Eventually(out.String, 10*time.Second).Should(MatchRegexp(`✓ control plane: new machine demo-cp-new at v1\.35\.4 \(after \d+s\)`))
	setMachineReady(t, ns, "demo-cp-new")
	g.Eventually(out.String, 10*time.Second).Should(MatchRegexp(`✓ control plane: node demo-cp-new ready at v1\.35\.4 \(after \d+s\)`))
	deleteMachine(t, ns, "demo-cp-old")
	g.Eventually(out.String, 10*time.Second).Should(MatchRegexp(`✓ control plane: machine demo-cp-old \(v1\.34\.4\) removed \(after \d+s\)`))

	// Then the pool: a new machine ready at once, the old one drained, then gone.
	upgradeMachine(t, ns, "demo", "workers", "demo-workers-new", "v1.35.4", true)
	deleteMachine(t, ns, "demo-workers-old")
	g.Eventually(out.String, 10*time.Second).Should(MatchRegexp(`✓ workers: machine demo-workers-old \(v1\.34\.4\) is being drained and removed \(after \d+s\)`))
	// Status written while the pool still rolls does not end the wait either.
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		knesttest.Ready(nc)
		nc.Status.Workers[0].Current = 2
		nc.Status.Workers[0].UpToDate = 1
	})
	g.Consistently(done, time.Second).ShouldNot(Receive())
	m := &clusterv1.Machine{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "demo-workers-old"}, m)).To(Succeed())
	m.Finalizers = nil
	g.Expect(env.Client.Update(t.Context(), m)).To(Succeed())
	setStatus(t, key, knesttest.Ready)

	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	stderr := out.String()
	got := knesttest.Lines(stderr)
	g.Expect(got).To(ContainElement("✓ cluster demo upgrading: control plane v1.34.4 -> v1.35.4"))
	g.Expect(stderr).To(MatchRegexp(`✓ workers: new machine demo-workers-new at v1\.35\.4 \(after \d+s\)`))
	g.Expect(stderr).To(MatchRegexp(`✓ workers: node demo-workers-new ready at v1\.35\.4 \(after \d+s\)`))
	// Every step of every machine is reported once, and before the cluster is ready.
	removed := `✓ workers: machine demo-workers-old \(v1\.34\.4\) removed \(after \d+s\)`
	g.Expect(stderr).To(MatchRegexp(removed + `\n ✓ cluster demo is ready\n`))
	g.Expect(stderr).NotTo(ContainSubstring("other-workers-old"), "machines of other clusters are not this upgrade's")
	for _, step := range []string{"new machine demo-cp-new", "node demo-cp-new ready", "demo-cp-old (v1.34.4) removed", "new machine demo-workers-new"} {
		g.Expect(countOf(got, step)).To(Equal(1), step)
	}
	g.Expect(stderr).NotTo(ContainSubstring("1/1 ready"), "counts say little while machines are replaced")

	// The versions the nodes run: the control plane first, then the pools, and
	// no machine of another cluster.
	machines, err := c.NodeVersions(t.Context(), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(HaveExactElements(
		And(HaveField("Pool", knestv1.ControlPlanePool), HaveField("Name", "demo-cp-new"), HaveField("Node", "demo-cp-new"), HaveField("Kubelet", "v1.35.4")),
		And(HaveField("Pool", "workers"), HaveField("Name", "demo-workers-new"), HaveField("Node", "demo-workers-new"), HaveField("Kubelet", "v1.35.4")),
	))
}

func TestUpgradeTimeoutSaysWhatStaysBehind(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", "v1.34.4", pool("workers", 1), pool("gpu", 1))
	setStatus(t, key, knesttest.Ready)
	upgradeMachine(t, ns, "demo", knestv1.ControlPlanePool, "demo-cp-old", "v1.34.4", true)
	upgradeMachine(t, ns, "demo", "workers", "demo-workers-old", "v1.34.4", true)
	upgradeMachine(t, ns, "demo", "gpu", "demo-gpu-old", "v1.34.4", true)
	c, _ := newClient(t)

	_, err := c.Upgrade(t.Context(), key, upgrade.Request{Version: "v1.35.4", HoldPools: []string{"gpu"}}, knest.UpgradeWithWait(3*time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("timed out after 3s waiting for cluster demo to be ready")))
	g.Expect(err).To(MatchError(HaveSuffix("\nThe upgrade (control plane v1.34.4 -> v1.35.4, pool gpu held at v1.34.4) stays in the cluster's spec " +
		"and Cluster API goes on replacing its machines; not yet rebuilt: control plane demo-cp-old (v1.34.4), workers demo-workers-old (v1.34.4). " +
		"Follow it with `knest get demo -n " + ns + "`; nodes cannot be downgraded, so there is no undo.")))
}
