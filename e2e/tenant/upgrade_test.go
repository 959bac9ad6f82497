//go:build e2e

package tenant_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

const (
	// Under emulation on two cores a control-plane machine takes 10–20 minutes to
	// boot and join, a worker 5–10; the rollout replaces both, one at a time.
	upgradeTimeout = 90 * time.Minute
	// maxOutage is the longest the workload may go unanswered. A request goes to
	// every live node at once each second and fails only if none answers within 3 s,
	// so 10 s is three or four requests in a row that no node could serve. An evicted
	// replica lingering in a node's kube-proxy rules for a moment (the expected
	// cause, until the endpoint change reaches every node) fails a node's request
	// only half the time, since the other replica is picked as often; several
	// all-node failures in a row mean no node could reach a Ready replica.
	maxOutage = 10 * time.Second
)

// TestUpgrade creates a cluster at the older node-image version, runs a workload of
// two replicas with a PodDisruptionBudget, polls it from outside the tenant while
// `knest upgrade` rolls every machine to the newer version, and asserts that the
// workload stayed up and that nothing of the old machines and templates is left.
//
// One worker, the default shape: the rollout surges one machine at a time (KCP and
// the MachineDeployment both with maxSurge 1, maxUnavailable 0), so the new worker
// joins before the old one is drained and both replicas move to it under the
// budget. A second worker would prove no more and cost another emulated VM (minutes
// of boot, and CPU the control plane needs) twice over: once created, once rolled.
func TestUpgrade(t *testing.T) {
	from, to := envOr(envUpgradeFrom, "v1.34.4"), envOr(envUpgradeTo, "v1.35.4")
	if os.Getenv(envNodeImage) != "" {
		t.Fatalf("%s pins every machine to one image whatever its version; the upgrade needs the node image of each version (%s and %s): unset it", envNodeImage, from, to)
	}
	// make e2e-upgrade runs it with a hosted control plane: a control-plane VM's
	// surge does not fit 2 emulated cores.
	hosted := os.Getenv(envControlPlaneMode) == "hosted"
	t.Logf("control plane: %s", map[bool]string{true: "hosted", false: "VM"}[hosted])
	key := client.ObjectKey{Namespace: newNamespace(t), Name: "upgrade"}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(key)
		}
	})

	ok := t.Run("create at "+from, func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
		defer cancel()
		step := "create at " + from
		start := time.Now()
		go watchCreate(ctx, step, key, start)
		spec := []string{"--version", from}
		if hosted {
			// Two workers, as the VM mode's control-plane node and worker: the
			// workload's two replicas keep a node each while the pool rolls.
			spec = append(append(spec, hostedFlags...), "--workers", "2")
		}
		_, err := createCluster(t, ctx, key, spec, "--timeout", createTimeout.String())
		g.Expect(err).NotTo(HaveOccurred(), "knest create --version %s", from)
		s.timeline.add(step, "knest create returned (Ready)", time.Since(start))
		tc := tenantClient(t, key)
		expectNodesReady(t, tc, 2)
		expectKubeletVersion(t, tc, 2, from)
		expectAddonsRunning(t, tc, 2)
	})
	if !ok {
		return // every later step needs the cluster
	}

	var nodePort int
	var pdbUID types.UID
	var marker *corev1.ConfigMap
	ok = t.Run("workload with a disruption budget", func(t *testing.T) {
		tc := tenantClient(t, key)
		expectServiceAnswers(t, tc, 2)
		nodePort = exposeOnNodePort(t, tc)
		pdbUID = protectWithPDB(t, tc, 2)
		marker = writeStateMarker(t, tc, "before the upgrade to "+to)
	})

	if ok {
		t.Run("upgrade to "+to, func(t *testing.T) {
			start := time.Now()
			upgradeAndWatch(t, key, from, to, nodePort, pdbUID)
			// etcd (a hosted one's pod, or the members Cluster API rolls) kept the
			// tenant's objects through the upgrade.
			expectStateMarker(t, tenantClient(t, key), marker, start)
		})
	}

	t.Run("delete", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), deleteTimeout)
		defer cancel()
		step := "delete " + key.Namespace + "/" + key.Name
		start := time.Now()
		_, err := knestCmd(t, ctx, "delete", key.Name, "-n", key.Namespace, "--timeout", deleteTimeout.String())
		g.Expect(err).NotTo(HaveOccurred(), "knest delete")
		s.timeline.add(step, "knest delete returned", time.Since(start))
		expectNamespaceEmpty(t, key.Namespace)
		s.timeline.add(step, "nothing left on the host", time.Since(start))
	})
}

// upgradeAndWatch runs `knest upgrade` while the poller and the machine watch
// record, then checks the outcome on the tenant and the host, and the workload's
// figures.
func upgradeAndWatch(t *testing.T, key client.ObjectKey, from, to string, nodePort int, pdbUID types.UID) {
	g := NewWithT(t)
	ctx := t.Context()
	step := fmt.Sprintf("upgrade %s → %s", from, to)
	tc := tenantClient(t, key)
	poller, err := startPoller(ctx, key, tc, nodePort)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(poller.served, tenantTimeout, poll).Should(BeTrue(), "the echo Service answers on NodePort %d from this process", nodePort)
	machines := watchMachines(t, key)

	start := time.Now()
	upCtx, cancel := context.WithTimeout(ctx, upgradeTimeout)
	out, err := knestCmd(t, upCtx, "upgrade", key.Name, "-n", key.Namespace, "--version", to, "--timeout", upgradeTimeout.String())
	cancel()
	took := time.Since(start)
	t.Logf("knest upgrade printed:\n%s", out)
	var report pollReport
	// The figures go into the timeline even when a check below stops the step.
	finish := sync.OnceFunc(func() {
		report = poller.stop(start)
		recordUpgrade(step, start, took, report, machines.stop())
	})
	t.Cleanup(finish)
	g.Expect(err).NotTo(HaveOccurred(), "knest upgrade --version %s", to)
	s.timeline.add(step, "knest upgrade returned (Ready at "+to+")", took)
	g.Expect(out).To(ContainSubstring(to), "knest upgrade's table of nodes and kubelet versions")

	// The tenant: every node replaced, at the new version, and the Service answers
	// inside it (DNS, kube-proxy and the CNI across the new nodes).
	expectNodesReady(t, tc, 2)
	expectKubeletVersion(t, tc, 2, to)
	expectServerVersion(t, tc, to)
	// kube-proxy and CoreDNS as the control plane rolled them, running from what the
	// new nodes have preloaded (nothing can be pulled).
	expectAddonsRunning(t, tc, 2)
	expectServiceAnswers(t, tc, 2)
	// The host: the status says so, and nothing of the old machines or templates
	// is left.
	expectStatusAt(t, key, to)
	for _, m := range machines.old() {
		expectGone(t, key.Namespace, m.Name, m.VM)
	}
	s.timeline.add(step, "old machines and VMs gone", time.Since(start))
	expectMachinesAt(t, key, to)
	expectOneVMPerMachine(t, key)
	expectNoStaleTemplates(t, key)

	finish()
	t.Logf("the workload during the upgrade: %d requests, %d failed, longest failure window %s; failure windows (s after the start): %s",
		report.Sent, report.Failed, report.Longest.Round(time.Second), report.windows())
	for _, w := range report.Windows {
		t.Logf("  failed at %.0f s for %s: %s", w.Start.Sub(start).Seconds(), w.Length.Round(time.Second), strings.Join(w.Errs, "; "))
	}
	t.Logf("the tenant API answered %d of %d replica samples; fewest Ready replicas seen: %d (at %.0f s)",
		report.Answered, report.Samples, report.MinReady, report.MinReadyAt.Sub(start).Seconds())
	g.Expect(report.Sent).To(BeNumerically(">=", int(took/(5*time.Second))), "the poller kept asking (one request a second)")
	g.Expect(report.Longest).To(BeNumerically("<=", maxOutage), "the longest time no node served the workload; failure windows (s after the start): %s", report.windows())
	g.Expect(report.Answered).To(BeNumerically(">", 0), "the tenant API never answered a replica sample")
	g.Expect(report.MinReady).To(BeNumerically(">=", 1), "Ready replicas at %.0f s after the start", report.MinReadyAt.Sub(start).Seconds())
	g.Expect(report.PDBMissing).To(BeEmpty(), "the PodDisruptionBudget was missing")
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: echoName}, pdb)).To(Succeed())
	g.Expect(pdb.UID).To(Equal(pdbUID), "the PodDisruptionBudget is the one created before the upgrade")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func expectKubeletVersion(t *testing.T, tc tenant, n int, version string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		nodes := &corev1.NodeList{}
		g.Expect(tc.List(t.Context(), nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(n))
		for _, node := range nodes.Items {
			g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(version), "kubelet of node %s", node.Name)
		}
	}, tenantTimeout, poll).Should(Succeed())
}

func expectServerVersion(t *testing.T, tc tenant, version string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(tc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		v, err := cs.Discovery().ServerVersion()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.GitVersion).To(Equal(version), "the tenant API server's version")
	}, tenantTimeout, poll).Should(Succeed())
}

// exposeOnNodePort gives the echo Deployment a NodePort Service, which every
// node's kube-proxy serves whichever node the replicas run on, and returns its port.
func exposeOnNodePort(t *testing.T, tc tenant) int {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: echoName + "-nodeport", Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": echoName},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := tc.Create(t.Context(), svc); err != nil {
		t.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	return int(svc.Spec.Ports[0].NodePort)
}

// protectWithPDB keeps at least one echo replica available through drains, and
// waits until the disruption controller counts every replica healthy.
func protectWithPDB(t *testing.T, tc tenant, replicas int32) types.UID {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: echoName, Namespace: metav1.NamespaceDefault},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": echoName}},
		},
	}
	if err := tc.Create(t.Context(), pdb); err != nil {
		t.Fatalf("creating PodDisruptionBudget %s: %v", pdb.Name, err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(tc.Get(t.Context(), client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
		g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
		g.Expect(pdb.Status.CurrentHealthy).To(Equal(replicas))
		g.Expect(pdb.Status.DisruptionsAllowed).To(Equal(replicas - 1))
	}, tenantTimeout, poll).Should(Succeed())
	return pdb.UID
}

// expectStatusAt: the NestedCluster reports the control plane and every pool at
// version, every machine up to date and nothing surging, and Ready.
func expectStatusAt(t *testing.T, key client.ObjectKey, version string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		nc := &knestv1.NestedCluster{}
		g.Expect(s.host.Get(t.Context(), key, nc)).To(Succeed())
		g.Expect(nc.Status.Version).To(Equal(version), "status.version")
		cp := nc.Status.ControlPlane
		g.Expect(cp.Desired).To(BeNumerically(">", 0), "control plane desired")
		g.Expect([]int32{cp.Ready, cp.Current, cp.UpToDate}).To(HaveEach(cp.Desired), "control plane ready, current, up to date vs desired")
		g.Expect(nc.Status.Workers).To(HaveLen(len(nc.Spec.Workers)), "a status per pool")
		for _, p := range nc.Status.Workers {
			g.Expect(p.Version).To(Equal(version), "pool %s", p.Name)
			g.Expect(p.Desired).To(BeNumerically(">", 0), "pool %s desired", p.Name)
			g.Expect([]int32{p.Ready, p.Current, p.UpToDate}).To(HaveEach(p.Desired), "pool %s ready, current, up to date vs desired", p.Name)
		}
		g.Expect(nc.Status.Conditions).To(ContainElement(And(HaveField("Type", knestv1.ReadyCondition), HaveField("Status", metav1.ConditionTrue))))
	}, tenantTimeout, poll).Should(Succeed())
}

func expectMachinesAt(t *testing.T, key client.ObjectKey, version string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(s.host.List(t.Context(), machines, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name})).To(Succeed())
		g.Expect(machines.Items).NotTo(BeEmpty())
		for _, m := range machines.Items {
			g.Expect(m.Spec.Version).To(Equal(version), "Machine %s", m.Name)
		}
	}, deleteTimeout, poll).Should(Succeed())
}

// expectNoStaleTemplates: every machine and bootstrap template in the namespace is
// one the KubeadmControlPlane (a hosted control plane has none) or a
// MachineDeployment references now; knest prunes the ones a rollout replaced once no
// MachineSet or machine uses them.
func expectNoStaleTemplates(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx := t.Context()
	hostedCP := hostedControlPlane(t, key)
	NewWithT(t).Eventually(func(g Gomega) {
		var inUse []string
		if !hostedCP {
			kcp := &controlplanev1.KubeadmControlPlane{}
			g.Expect(s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: cluster.ControlPlaneName(key.Name)}, kcp)).To(Succeed())
			inUse = append(inUse, kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name)
		}
		mds := &clusterv1.MachineDeploymentList{}
		g.Expect(s.host.List(ctx, mds, client.InNamespace(key.Namespace))).To(Succeed())
		for _, md := range mds.Items {
			inUse = append(inUse, md.Spec.Template.Spec.InfrastructureRef.Name, md.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
		}
		for _, l := range []client.ObjectList{&infrav1.KubevirtMachineTemplateList{}, &bootstrapv1.KubeadmConfigTemplateList{}} {
			g.Expect(s.host.List(ctx, l, client.InNamespace(key.Namespace))).To(Succeed())
			for _, o := range itemsOf(l) {
				g.Expect(inUse).To(ContainElement(o.GetName()), "%T %s: referenced by neither the KubeadmControlPlane nor a MachineDeployment", o, o.GetName())
			}
		}
	}, deleteTimeout, poll).Should(Succeed())
}

// machineWatch records, from the host's Machine objects, when each machine of a
// cluster was created, got its node Ready, began deleting and was gone.
type machineWatch struct {
	key    client.ObjectKey
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	machines map[string]*machineRecord
}

// machineRecord is one machine's milestones: Created, NodeReady and Deleting from
// the object (its timestamps, the NodeReady condition's transition), Gone from the
// first poll that did not find it.
type machineRecord struct {
	Name, VM string
	Group    string // "control plane" or "pool <name>"
	Version  string
	Old      bool // existed when the watch began

	Created, NodeReady, Deleting, Gone time.Time
}

// watchMachines records the cluster's machines as they are now (the old ones)
// and then every poll until stop.
func watchMachines(t *testing.T, key client.ObjectKey) *machineWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &machineWatch{key: key, cancel: cancel, done: make(chan struct{}), machines: map[string]*machineRecord{}}
	if err := w.observe(ctx, true); err != nil {
		cancel()
		t.Fatalf("listing the machines of %s: %v", key, err)
	}
	go func() {
		defer close(w.done)
		every(ctx, poll, func(ctx context.Context) { _ = w.observe(ctx, false) })
	}()
	return w
}

func (w *machineWatch) observe(ctx context.Context, old bool) error {
	machines := &clusterv1.MachineList{}
	if err := s.host.List(ctx, machines, client.InNamespace(w.key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: w.key.Name}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range machines.Items {
		seen[m.Name] = true
		r := w.machines[m.Name]
		if r == nil {
			r = &machineRecord{Name: m.Name, Group: machineGroup(&m), Version: m.Spec.Version, Old: old, Created: m.CreationTimestamp.Time}
			w.machines[m.Name] = r
		}
		r.VM = m.Spec.InfrastructureRef.Name // the VM is named after the KubevirtMachine
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineNodeReadyCondition); r.NodeReady.IsZero() && c != nil && c.Status == metav1.ConditionTrue {
			r.NodeReady = c.LastTransitionTime.Time
		}
		if r.Deleting.IsZero() && !m.DeletionTimestamp.IsZero() {
			r.Deleting = m.DeletionTimestamp.Time
		}
	}
	for name, r := range w.machines {
		if !seen[name] && r.Gone.IsZero() {
			r.Gone = time.Now()
		}
	}
	return nil
}

func machineGroup(m *clusterv1.Machine) string {
	if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		return "control plane"
	}
	if pool := m.Labels[knestv1.PoolNameLabel]; pool != "" {
		return "pool " + pool
	}
	return "pool " + m.Labels[clusterv1.MachineDeploymentNameLabel]
}

// old returns the machines that existed when the watch began.
func (w *machineWatch) old() []machineRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []machineRecord
	for _, r := range w.machines {
		if r.Old {
			out = append(out, *r)
		}
	}
	return out
}

// stop ends the watch and returns every machine seen, the control plane first,
// then each pool, each group in order of creation.
func (w *machineWatch) stop() []machineRecord {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]machineRecord, 0, len(w.machines))
	for _, r := range w.machines {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b machineRecord) int {
		if a.Group != b.Group {
			return strings.Compare(a.Group, b.Group) // "control plane" < "pool ..."
		}
		return a.Created.Compare(b.Created)
	})
	return out
}

// recordUpgrade writes the upgrade's machines and figures into the timeline:
// per group (control plane, then each pool) each machine's milestones in order,
// then minutes per machine and what the poller saw.
func recordUpgrade(step string, start time.Time, took time.Duration, r pollReport, machines []machineRecord) {
	var rows []timelineRow
	flush := func() {
		slices.SortStableFunc(rows, func(a, b timelineRow) int { return cmp.Compare(a.After, b.After) })
		for _, row := range rows {
			s.timeline.add(step, row.Milestone, row.After)
		}
		rows = nil
	}
	minutes := func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "not seen"
		}
		return fmt.Sprintf("%.1f min", to.Sub(from).Minutes())
	}
	for i, m := range machines {
		if i > 0 && machines[i-1].Group != m.Group {
			flush()
		}
		mark := func(what string, at time.Time) {
			if !at.IsZero() {
				rows = append(rows, timelineRow{Milestone: fmt.Sprintf("%s: %s %s", m.Group, m.Name, what), After: at.Sub(start)})
			}
		}
		if m.Old {
			mark("(old, "+m.Version+") deleting", m.Deleting)
			mark("(old) gone", m.Gone)
			s.timeline.figure(step, m.Group+": old "+m.Name, "deleting → gone "+minutes(m.Deleting, m.Gone))
		} else {
			mark("(new, "+m.Version+") created", m.Created)
			mark("(new) node Ready", m.NodeReady)
			s.timeline.figure(step, m.Group+": new "+m.Name, "created → node Ready "+minutes(m.Created, m.NodeReady))
		}
	}
	flush()
	s.timeline.figure(step, "knest upgrade", fmt.Sprintf("%.1f min", took.Minutes()))
	s.timeline.figure(step, "requests to the workload (1/s, every node)", fmt.Sprintf("%d sent, %d failed", r.Sent, r.Failed))
	s.timeline.figure(step, "longest failure window", fmt.Sprintf("%s (at most %s)", r.Longest.Round(time.Second), maxOutage))
	s.timeline.figure(step, "failures (s after the start, length)", r.windows())
	s.timeline.figure(step, "fewest Ready replicas seen", fmt.Sprintf("%d (tenant API answered %d of %d samples)", r.MinReady, r.Answered, r.Samples))
}
