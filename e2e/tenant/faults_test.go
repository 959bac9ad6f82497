//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
	"github.com/knest-dev/knest/pkg/scale"
)

// envFaultsSeed replays TestFaults' random injection points.
const envFaultsSeed = "KNEST_E2E_FAULTS_SEED"

const (
	convergeTimeout  = 25 * time.Minute
	inventoryTimeout = 3 * time.Minute
	// hostFreeze is how long the host's API server stops answering.
	hostFreeze = 30 * time.Second
)

// TestFaults (make e2e-faults) injects faults at random points of creates and scales
// of hosted clusters on the kind host, several times each. Every try must end with
// the cluster converged (or failed with the reason in its status), and then an
// inventory of its namespace must find nothing leaked or duplicated: one VM and one
// virt-launcher pod per Machine, no object whose owners are gone. Each cluster is
// deleted at the end and must leave nothing. The table of tries goes to faults.md in
// the state directory (docs/e2e.md keeps the last one).
//
// Hosted control planes: a control-plane VM does not leave room on 2 emulated cores
// for the faults' restarts; the VM-only faults (a worker's VM) still run for real.
func TestFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envFaultsSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envFaultsSeed, v, err)
		}
	}
	t.Logf("random injection points from seed %d (%s=%d replays them)", seed, envFaultsSeed, seed)
	f := &faults{rng: rand.New(rand.NewPCG(seed, 0))}
	t.Cleanup(func() {
		path := filepath.Join(s.stateDir, "faults.md")
		table := f.markdown()
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
		fmt.Printf("\nFault tries (seed %d):\n%s\nWritten to %s\n", seed, table, path)
	})

	t.Run("knest controller killed during a create", func(t *testing.T) {
		// Three control-plane-only creates (the controller's own work: render,
		// apply, certificates, kubeadm's Job), two with a worker booting.
		for i, workers := range []int{0, 0, 0, 1, 1} {
			// A control-plane-only create is Ready in about 25 s here.
			window := 20 * time.Second
			if workers > 0 {
				window = 150 * time.Second
			}
			f.createTry(t, i, workers, "knest controller killed during a create", f.after(window), killPodsOf("knest-system", "knest-controller", "Deployment"))
		}
	})
	t.Run("hosted API server killed during a create", func(t *testing.T) {
		f.createTry(t, 0, 0, "hosted API server pod killed", f.after(20*time.Second), killHostedAPIServer)
	})
	t.Run("host API server unreachable during a create", func(t *testing.T) {
		f.createTry(t, 0, 0, "host API server unreachable for 30 s", f.after(10*time.Second), freezeHostAPIServer)
	})
	t.Run("delete during provisioning", func(t *testing.T) {
		for i := range 3 {
			f.deleteTry(t, i, f.after(150*time.Second))
		}
	})
	t.Run("scales", f.scaleTries)
}

// faults runs the tries and keeps their table.
type faults struct {
	rng  *rand.Rand
	mu   sync.Mutex
	rows []*faultRow
}

// faultRow is one line of the table: a fault and how its tries ended.
type faultRow struct {
	fault     string
	tries     int
	converged int
	took      []time.Duration // fault → converged (deleted, for a delete)
	at        []string        // when each fault came: s after the create or scale began, and the phase
	left      []string
	notes     []string
}

func (f *faults) row(fault string) *faultRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rows {
		if r.fault == fault {
			return r
		}
	}
	r := &faultRow{fault: fault}
	f.rows = append(f.rows, r)
	return r
}

func (f *faults) markdown() string {
	var b strings.Builder
	b.WriteString("| Fault | Tries | Injected at (s after the create or scale began, phase) | Converged | Time to converge after the fault (median, max) | Anything left |\n|---|---|---|---|---|---|\n")
	for _, r := range f.rows {
		took := "–"
		if len(r.took) > 0 {
			d := slices.Clone(r.took)
			slices.Sort(d)
			median := (d[(len(d)-1)/2] + d[len(d)/2]) / 2
			took = fmt.Sprintf("%s, %s", median.Round(time.Second), d[len(d)-1].Round(time.Second))
		}
		left := "nothing"
		if len(r.left) > 0 {
			left = strings.Join(r.left, "; ")
		}
		fault := r.fault
		if len(r.notes) > 0 {
			fault += " (" + strings.Join(r.notes, "; ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %s |\n", fault, r.tries, strings.Join(r.at, ", "), r.converged, took, left)
	}
	return b.String()
}

// trigger waits for the point at which a fault is injected.
type trigger func(ctx context.Context, t *testing.T, key client.ObjectKey) error

// injector injects a fault into a cluster's host and says what it did.
type injector func(ctx context.Context, t *testing.T, key client.ObjectKey) (string, error)

// after triggers at a random point of the next window.
func (f *faults) after(window time.Duration) trigger {
	var d time.Duration
	if window > 0 {
		f.mu.Lock()
		d = time.Duration(f.rng.Int64N(int64(window)))
		f.mu.Unlock()
	}
	return func(ctx context.Context, t *testing.T, _ client.ObjectKey) error {
		t.Logf("injecting the fault in %s", d.Round(time.Second))
		return sleepCtx(ctx, d)
	}
}

// whenVMBooting triggers at a random point of the first minute after a worker VMI
// that is not among before started to run.
func (f *faults) whenVMBooting(before []string) trigger {
	after := f.after(time.Minute)
	return func(ctx context.Context, t *testing.T, key client.ObjectKey) error {
		for {
			for _, vmi := range vmisOf(ctx, key) {
				if !slices.Contains(before, vmi.Name) && vmi.Status.Phase == kubevirtv1.Running {
					t.Logf("VMI %s is running", vmi.Name)
					return after(ctx, t, key)
				}
			}
			if err := sleepCtx(ctx, 2*time.Second); err != nil {
				return err
			}
		}
	}
}

// createTry creates a hosted cluster with workers, injects the fault when the trigger
// says, expects convergence and a clean inventory, then deletes the cluster and
// expects nothing left.
func (f *faults) createTry(t *testing.T, i, workers int, fault string, when trigger, inject injector) {
	t.Run(strconv.Itoa(i+1), func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), convergeTimeout)
		defer cancel()
		key := client.ObjectKey{Namespace: newNamespace(t), Name: "fault"}
		t.Cleanup(func() {
			if t.Failed() {
				diagnose(key)
			}
		})
		spec := append(slices.Clone(hostedFlags), "--workers", strconv.Itoa(workers))
		began := time.Now()
		_, err := createCluster(t, ctx, key, spec, "--wait=false")
		g.Expect(err).NotTo(HaveOccurred(), "knest create")
		f.inject(t, ctx, key, began, fault, workers, when, inject)
		f.deleteAndExpectEmpty(t, key, fault)
	})
}

// inject waits for the trigger, injects the fault, and records how the try ended.
func (f *faults) inject(t *testing.T, ctx context.Context, key client.ObjectKey, began time.Time, fault string, workers int, when trigger, inject injector) {
	r := f.row(fault)
	f.mu.Lock()
	r.tries++
	f.mu.Unlock()
	if err := when(ctx, t, key); err != nil {
		t.Fatalf("waiting for the point to inject %q: %v", fault, err)
	}
	at := fmt.Sprintf("%.0f (%s)", time.Since(began).Seconds(), phaseOf(ctx, key))
	did, err := inject(ctx, t, key)
	if err != nil {
		t.Fatalf("injecting %q: %v", fault, err)
	}
	t.Logf("fault injected: %s", did)
	start := time.Now()
	outcome := awaitConverged(t, ctx, key, workers)
	took := time.Since(start)
	left := inventory(t, key, workers)
	f.mu.Lock()
	defer f.mu.Unlock()
	r.at = append(r.at, at)
	switch {
	case outcome == "":
		r.converged++
		r.took = append(r.took, took)
	case strings.HasPrefix(outcome, "failed cleanly"):
		r.notes = append(r.notes, outcome)
	default:
		t.Errorf("%s: neither converged nor failed cleanly: %s", fault, outcome)
	}
	for _, l := range left {
		t.Errorf("%s: inventory of %s: %s", fault, key.Namespace, l)
		r.left = append(r.left, l)
	}
	t.Logf("%s: %s after the fault; inventory: %d problems", fault, took.Round(time.Second), len(left))
}

// awaitConverged waits until the NestedCluster's status has reached its spec and is
// Ready and the tenant has workers Ready nodes (its API answers when it has none). It
// returns "" then, "failed cleanly: reason" when the cluster's phase is Failed, or
// what it was waiting for at the timeout.
func awaitConverged(t *testing.T, ctx context.Context, key client.ObjectKey, workers int) string {
	var last string
	var tc tenant
	for {
		nc := &knestv1.NestedCluster{}
		err := s.host.Get(ctx, key, nc)
		switch {
		case err != nil:
			last = err.Error()
		case nc.Status.ObservedGeneration >= nc.Generation && nc.Status.Phase == knestv1.PhaseFailed:
			return "failed cleanly: " + describeReady(nc)
		case scale.Converged(nc) && isReady(nc):
			if last = tenantConverged(ctx, key, &tc, workers); last == "" {
				return ""
			}
		default:
			last = fmt.Sprintf("phase %s, %s, pending %v", nc.Status.Phase, describeReady(nc), scale.Pending(nc))
		}
		if sleepCtx(ctx, poll) != nil {
			return "timed out: " + last
		}
	}
}

// phaseOf is the cluster's phase, "converged" once its status has reached its spec
// and it is Ready.
func phaseOf(ctx context.Context, key client.ObjectKey) string {
	nc := &knestv1.NestedCluster{}
	if err := s.host.Get(ctx, key, nc); err != nil {
		return "unread"
	}
	if scale.Converged(nc) && isReady(nc) {
		return "converged"
	}
	if nc.Status.Phase == "" {
		return "no status"
	}
	return string(nc.Status.Phase)
}

func isReady(nc *knestv1.NestedCluster) bool {
	c := meta.FindStatusCondition(nc.Status.Conditions, knestv1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue
}

func describeReady(nc *knestv1.NestedCluster) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, knestv1.ReadyCondition); c != nil {
		return fmt.Sprintf("Ready %s %s: %s", c.Status, c.Reason, c.Message)
	}
	return "no Ready condition"
}

// tenantConverged says what the tenant still lacks: its API, or workers Ready nodes.
// tc is loaded on first use.
func tenantConverged(ctx context.Context, key client.ObjectKey, tc *tenant, workers int) string {
	if tc.Client == nil {
		server, err := hostedServer(ctx, key)
		if err == nil {
			*tc, err = loadTenantClient(ctx, key, server)
		}
		if err != nil {
			return err.Error()
		}
	}
	nodes := &corev1.NodeList{}
	if err := tc.List(ctx, nodes); err != nil {
		return "tenant API: " + err.Error()
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if len(nodes.Items) != workers || ready != workers {
		return fmt.Sprintf("tenant has %d nodes, %d Ready; want %d", len(nodes.Items), ready, workers)
	}
	return ""
}

// deleteTry creates a hosted cluster with a worker, deletes it at the trigger's
// point, and expects it gone with nothing left.
func (f *faults) deleteTry(t *testing.T, i int, when trigger) {
	const fault = "delete during provisioning"
	t.Run(strconv.Itoa(i+1), func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), convergeTimeout)
		defer cancel()
		key := client.ObjectKey{Namespace: newNamespace(t), Name: "fault"}
		r := f.row(fault)
		f.mu.Lock()
		r.tries++
		f.mu.Unlock()
		spec := append(slices.Clone(hostedFlags), "--workers", "1")
		began := time.Now()
		_, err := createCluster(t, ctx, key, spec, "--wait=false")
		g.Expect(err).NotTo(HaveOccurred(), "knest create")
		g.Expect(when(ctx, t, key)).To(Succeed())
		at := fmt.Sprintf("%.0f (%s)", time.Since(began).Seconds(), phaseOf(ctx, key))
		t.Logf("deleting at %s", at)
		start := time.Now()
		ok := f.deleteAndExpectEmpty(t, key, fault)
		f.mu.Lock()
		r.at = append(r.at, at)
		f.mu.Unlock()
		if ok {
			f.mu.Lock()
			r.converged++
			r.took = append(r.took, time.Since(start))
			f.mu.Unlock()
		}
	})
}

// deleteAndExpectEmpty deletes the cluster with the CLI and expects its namespace
// empty; what is left goes into the fault's row.
func (f *faults) deleteAndExpectEmpty(t *testing.T, key client.ObjectKey, fault string) bool {
	ctx, cancel := context.WithTimeout(t.Context(), deleteTimeout)
	defer cancel()
	if _, err := knestCmd(t, ctx, "delete", key.Name, "-n", key.Namespace, "--timeout", deleteTimeout.String()); err != nil {
		t.Errorf("knest delete %s: %v", key, err)
	}
	left := leftIn(ctx, key.Namespace)
	if len(left) == 0 {
		_ = s.host.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}})
		return true
	}
	r := f.row(fault)
	f.mu.Lock()
	r.left = append(r.left, "after delete: "+strings.Join(left, ", "))
	f.mu.Unlock()
	t.Errorf("after deleting %s: left %v", key, left)
	return false
}

// leftIn polls the namespace until nothing of clusterKinds is left or inventoryTimeout passes, and returns what is left.
func leftIn(ctx context.Context, ns string) []string {
	var left []string
	deadline := time.Now().Add(inventoryTimeout)
	for {
		left = nil
		for _, l := range clusterKinds() {
			if err := s.host.List(ctx, l, client.InNamespace(ns)); err != nil {
				left = append(left, err.Error())
				continue
			}
			for _, o := range itemsOf(l) {
				if !everyNamespaceHas(o) {
					left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) || sleepCtx(ctx, poll) != nil {
			return left
		}
	}
}

// scaleTries run on one cluster: a pool scaled up and down with a manager, KubeVirt's
// node agent, a worker's launcher pod or the API server killed on the way.
func (f *faults) scaleTries(t *testing.T) {
	g := NewWithT(t)
	key := client.ObjectKey{Namespace: newNamespace(t), Name: "scaled"}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(key)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), convergeTimeout)
	_, err := createCluster(t, ctx, key, append(slices.Clone(hostedFlags), "--workers", "0"), "--timeout", convergeTimeout.String())
	cancel()
	g.Expect(err).NotTo(HaveOccurred(), "knest create")

	capi := killPodsOf("capi-system", "capi-controller-manager", "Deployment")
	capk := killPodsOf("capk-system", "capk-controller-manager", "Deployment")
	tries := []struct {
		fault    string
		to       int
		booting  bool // trigger while the new worker VM boots, not at a random point
		window   time.Duration
		injector injector
	}{
		{"Cluster API manager killed during a scale", 1, false, 90 * time.Second, capi},
		{"CAPK manager killed during a scale", 0, false, 30 * time.Second, capk},
		{"CAPK manager killed during a scale", 1, false, 90 * time.Second, capk},
		{"Cluster API manager killed during a scale", 0, false, 30 * time.Second, capi},
		{"virt-handler restarted while a VM boots", 1, true, 0, killPodsOf("kubevirt", "virt-handler", "DaemonSet")},
		{"worker's virt-launcher pod deleted while its VM boots", 2, true, 0, deleteBootingLauncherPod},
		{"hosted API server pod killed", 0, false, 30 * time.Second, killHostedAPIServer},
	}
	for i, tr := range tries {
		ok := t.Run(fmt.Sprintf("%d %s", i+1, tr.fault), func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(t.Context(), convergeTimeout)
			defer cancel()
			var before []string
			for _, vmi := range vmisOf(ctx, key) {
				before = append(before, vmi.Name)
			}
			var when trigger
			if tr.booting {
				when = f.whenVMBooting(before)
			} else {
				when = f.after(tr.window)
			}
			began := time.Now()
			_, err := knestCmd(t, ctx, "scale", key.Name, "-n", key.Namespace, "--workers", strconv.Itoa(tr.to), "--wait=false")
			g.Expect(err).NotTo(HaveOccurred(), "knest scale --workers %d", tr.to)
			f.inject(t, ctx, key, began, tr.fault, tr.to, when, tr.injector)
		})
		if !ok {
			break // the next try starts from this one's end
		}
	}
	f.deleteAndExpectEmpty(t, key, "scales: delete at the end")
}

// killPodsOf deletes at once (no grace) every pod of a Deployment or DaemonSet.
func killPodsOf(ns, name, kind string) injector {
	return func(ctx context.Context, _ *testing.T, _ client.ObjectKey) (string, error) {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("apps/v1")
		obj.SetKind(kind)
		if err := s.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return "", err
		}
		sel, _, err := unstructured.NestedStringMap(obj.Object, "spec", "selector", "matchLabels")
		if err != nil || len(sel) == 0 {
			return "", fmt.Errorf("%s %s/%s has no matchLabels selector (%v)", kind, ns, name, err)
		}
		return deletePods(ctx, ns, sel)
	}
}

// killHostedAPIServer deletes the cluster's hosted API server pods at once, waiting
// for the first one if its Deployment has none yet.
func killHostedAPIServer(ctx context.Context, _ *testing.T, key client.ObjectKey) (string, error) {
	for {
		did, err := deletePods(ctx, key.Namespace, map[string]string{clusterv1.ClusterNameLabel: key.Name, hosted.ComponentLabel: hosted.ComponentAPIServer})
		if err == nil || sleepCtx(ctx, time.Second) != nil {
			return did, err
		}
	}
}

func deletePods(ctx context.Context, ns string, sel map[string]string) (string, error) {
	pods := &corev1.PodList{}
	if err := s.host.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
		return "", err
	}
	var names []string
	for i := range pods.Items {
		if err := s.host.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			return "", err
		}
		names = append(names, pods.Items[i].Name)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no pods in %s match %v", ns, labels.Set(sel))
	}
	return fmt.Sprintf("deleted pods %s/%s", ns, strings.Join(names, ", ")), nil
}

// deleteBootingLauncherPod deletes the virt-launcher pod of the newest worker VMI.
func deleteBootingLauncherPod(ctx context.Context, _ *testing.T, key client.ObjectKey) (string, error) {
	vmis := vmisOf(ctx, key)
	if len(vmis) == 0 {
		return "", fmt.Errorf("no VMIs of %s", key)
	}
	newest := slices.MaxFunc(vmis, func(a, b kubevirtv1.VirtualMachineInstance) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return deletePods(ctx, key.Namespace, map[string]string{"kubevirt.io/created-by": string(newest.UID)})
}

func vmisOf(ctx context.Context, key client.ObjectKey) []kubevirtv1.VirtualMachineInstance {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		return nil
	}
	return vmis.Items
}

// freezeHostAPIServer stops the host's own kube-apiserver process (SIGSTOP) for
// hostFreeze, from a privileged host-PID pod on its node: every client's connections
// hang, as in a network partition. While it is frozen, knest list must fail quickly
// with a message that says the server does not answer. The pod thaws the server even
// if it is killed.
func freezeHostAPIServer(ctx context.Context, t *testing.T, _ client.ObjectKey) (string, error) {
	ns := newNamespace(t)
	defer func() {
		_ = s.host.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()
	nodes := &corev1.NodeList{}
	if err := s.host.List(ctx, nodes, client.MatchingLabels{"node-role.kubernetes.io/control-plane": ""}); err != nil || len(nodes.Items) == 0 {
		return "", fmt.Errorf("the host's control-plane node: %v", err)
	}
	// kind's API server is the one whose etcd is on the node's loopback; hosted
	// tenants' API servers on the same node use their own etcd Service.
	script := `pid=
for p in /proc/[0-9]*; do
  c=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
  case "$c" in kube-apiserver*--etcd-servers=https://127.0.0.1:2379*) pid=${p#/proc/} ;; esac
done
[ -n "$pid" ] || { echo "no kube-apiserver found"; exit 1; }
trap 'busybox kill -CONT $pid' EXIT INT TERM
sleep 3
echo "freezing kube-apiserver $pid"
busybox kill -STOP "$pid"
sleep ` + strconv.Itoa(int(hostFreeze.Seconds())) + `
busybox kill -CONT "$pid"
echo thawed`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-apiserver", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: nodes.Items[0].Name, HostPID: true, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "freeze", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
		},
	}
	if err := s.host.Create(ctx, pod); err != nil {
		return "", err
	}
	// Frozen: a request of this process's does not come back within 2 s.
	frozenAt := time.Now()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.host.Get(rctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		cancel()
		if err != nil && rctx.Err() != nil {
			frozenAt = time.Now()
			break
		}
		if time.Since(frozenAt) > time.Minute {
			return "", fmt.Errorf("the host's API server never stopped answering (pod %s: %v)", pod.Name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Log("the host's API server is frozen")
	start := time.Now()
	out, err := knestCmdQuiet(ctx, "list", "-n", ns)
	took := time.Since(start)
	t.Logf("knest list while frozen, %s: %s", took.Round(100*time.Millisecond), strings.TrimSpace(out))
	if err == nil || !strings.Contains(out, "did not answer in time") {
		t.Errorf("knest list while the host's API server is frozen: want an error saying it did not answer, got %v: %s", err, out)
	}
	// Thawed: it answers again.
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.host.Get(rctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		time.Sleep(time.Second)
	}
	return fmt.Sprintf("host API server frozen for about %s (answers again %s after it stopped); knest list failed after %s",
		hostFreeze, time.Since(frozenAt).Round(time.Second), took.Round(100*time.Millisecond)), nil
}

// inventory lists what is leaked or duplicated in a converged cluster's namespace:
// Machines without exactly one KubevirtMachine, KubeadmConfig and VM (and VMs without
// a Machine), VMIs without exactly one live virt-launcher pod, launcher pods without a
// VMI, a hosted control plane without exactly one API server Deployment, etcd
// StatefulSet and etcd claim, and objects whose owners are all gone. It polls up to
// inventoryTimeout, because garbage collection lags; what is still wrong then is
// returned.
func inventory(t *testing.T, key client.ObjectKey, workers int) []string {
	ctx := t.Context()
	deadline := time.Now().Add(inventoryTimeout)
	for {
		problems := inventoryOnce(ctx, key, workers)
		if len(problems) == 0 || time.Now().After(deadline) || sleepCtx(ctx, poll) != nil {
			return problems
		}
	}
}

func inventoryOnce(ctx context.Context, key client.ObjectKey, workers int) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	in := client.InNamespace(key.Namespace)
	of := client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}

	machines := &clusterv1.MachineList{}
	kvms := &capkv1.KubevirtMachineList{}
	configs := &bootstrapv1.KubeadmConfigList{}
	vms := &kubevirtv1.VirtualMachineList{}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	pods := &corev1.PodList{}
	for _, l := range []client.ObjectList{machines, kvms, configs, vms, vmis} {
		if err := s.host.List(ctx, l, in, of); err != nil {
			return []string{err.Error()}
		}
	}
	if err := s.host.List(ctx, pods, in, client.MatchingLabels{"kubevirt.io": "virt-launcher"}); err != nil {
		return []string{err.Error()}
	}
	if len(machines.Items) != workers {
		add("%d Machines, want %d", len(machines.Items), workers)
	}
	names := func(objs []client.Object) []string {
		var n []string
		for _, o := range objs {
			n = append(n, o.GetName())
		}
		slices.Sort(n)
		return n
	}
	var infra, boot []string
	for _, m := range machines.Items {
		infra = append(infra, m.Spec.InfrastructureRef.Name)
		boot = append(boot, m.Spec.Bootstrap.ConfigRef.Name)
	}
	slices.Sort(infra)
	slices.Sort(boot)
	for _, c := range []struct {
		what string
		got  []string
		want []string
	}{
		{"KubevirtMachines", names(itemsOf(kvms)), infra},
		{"KubeadmConfigs", names(itemsOf(configs)), boot},
		{"VMs", names(itemsOf(vms)), infra},
		{"VMIs", names(itemsOf(vmis)), infra},
	} {
		if !slices.Equal(c.got, c.want) {
			add("%s %v, want one per Machine %v", c.what, c.got, c.want)
		}
	}
	live := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live[p.Labels["kubevirt.io/created-by"]]++
		}
	}
	for _, vmi := range vmis.Items {
		if n := live[string(vmi.UID)]; n != 1 {
			add("VMI %s has %d live virt-launcher pods", vmi.Name, n)
		}
		delete(live, string(vmi.UID))
	}
	for uid, n := range live {
		add("%d live virt-launcher pods of no VMI (created by %s)", n, uid)
	}

	// A hosted control plane: one API server Deployment, one etcd StatefulSet, at
	// most one etcd claim (none without a StorageClass).
	deploys := &appsv1.DeploymentList{}
	sets := &appsv1.StatefulSetList{}
	claims := &corev1.PersistentVolumeClaimList{}
	for _, l := range []client.ObjectList{deploys, sets, claims} {
		if err := s.host.List(ctx, l, in); err != nil {
			return []string{err.Error()}
		}
	}
	if n := len(deploys.Items); n != 1 {
		add("%d Deployments, want the API servers' one", n)
	}
	if n := len(sets.Items); n != 1 {
		add("%d StatefulSets, want etcd's one", n)
	}
	if n := len(claims.Items); n > 1 {
		add("%d PersistentVolumeClaims, want etcd's one at most", n)
	}

	// Orphans: an object every owner of which is gone would never be collected by
	// anyone but the garbage collector, which has had inventoryTimeout.
	for _, l := range clusterKinds() {
		if err := s.host.List(ctx, l, in); err != nil {
			return []string{err.Error()}
		}
		for _, o := range itemsOf(l) {
			refs := o.GetOwnerReferences()
			if len(refs) == 0 || o.GetDeletionTimestamp() != nil {
				continue
			}
			alive := false
			for _, ref := range refs {
				owner := &unstructured.Unstructured{}
				owner.SetAPIVersion(ref.APIVersion)
				owner.SetKind(ref.Kind)
				err := s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: ref.Name}, owner)
				if err == nil && owner.GetUID() == ref.UID {
					alive = true
					break
				}
			}
			if !alive {
				add("%T %s: every owner is gone (%s %s)", o, o.GetName(), refs[0].Kind, refs[0].Name)
			}
		}
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
