package startuptaint_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/knest-dev/knest/internal/testenv"
	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

// The tests run the reconciler against a real kube-apiserver standing for the
// tenant's; its kube-controller-manager taints the kubelet-less Nodes too
// (not-ready, unreachable), which the removal must keep.

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// userTaint is a pool's own taint, which must outlive the startup taint.
var userTaint = corev1.Taint{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// startManager runs the reconciler in a manager of the test bed until the test ends.
func startManager(t *testing.T, g Gomega) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect((&startuptaint.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)).To(Succeed())
	testenv.RunManager(t, mgr)
}

// node creates a Node as kubelet registers one with taints.
func node(t *testing.T, g Gomega, name string, taints ...corev1.Taint) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	g.Expect(env.Client.Create(context.Background(), n)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
}

// csiNode creates or updates the CSINode of node name with drivers, as kubelet does
// when it starts and when a plugin registers.
func csiNode(t *testing.T, g Gomega, name string, drivers ...string) {
	t.Helper()
	ctx := context.Background()
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, d := range drivers {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: name})
	}
	existing := &storagev1.CSINode{}
	switch err := env.Client.Get(ctx, types.NamespacedName{Name: name}, existing); {
	case apierrors.IsNotFound(err):
		g.Expect(env.Client.Create(ctx, cn)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
	case err == nil:
		existing.Spec = cn.Spec
		g.Expect(env.Client.Update(ctx, existing)).To(Succeed())
	default:
		g.Expect(err).NotTo(HaveOccurred())
	}
}

func taints(g Gomega, name string) []corev1.Taint {
	n := &corev1.Node{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: name}, n)).To(Succeed())
	return n.Spec.Taints
}

func hasStartupTaint(g Gomega, name string) bool {
	return startuptaint.HasTaint(&corev1.Node{Spec: corev1.NodeSpec{Taints: taints(g, name)}})
}

func TestRemovedOnceThePluginRegisters(t *testing.T) {
	g := NewWithT(t)
	startManager(t, g)
	node(t, g, "registers", startuptaint.Taint, userTaint)
	// Kubelet's CSINode before any plugin, then with another driver: the taint stays.
	csiNode(t, g, "registers")
	csiNode(t, g, "registers", "other.csi.example.com")
	g.Consistently(func(g Gomega) bool { return hasStartupTaint(g, "registers") }, 3*time.Second, 200*time.Millisecond).Should(BeTrue())

	csiNode(t, g, "registers", "other.csi.example.com", knestcsi.DriverName)
	g.Eventually(func(g Gomega) bool { return hasStartupTaint(g, "registers") }, 30*time.Second, 200*time.Millisecond).Should(BeFalse())
	g.Expect(taints(g, "registers")).To(ContainElement(userTaint), "the pool's own taint stays")
}

func TestRemovedFromANodeRegisteredAfterItsPlugin(t *testing.T) {
	g := NewWithT(t)
	startManager(t, g)
	// A kubelet that registers its Node again (deleted and re-created) finds its
	// CSINode listing the driver already: only the Node's own event comes.
	csiNode(t, g, "late", knestcsi.DriverName)
	time.Sleep(time.Second)
	node(t, g, "late", startuptaint.Taint)
	g.Eventually(func(g Gomega) bool { return hasStartupTaint(g, "late") }, 30*time.Second, 200*time.Millisecond).Should(BeFalse())
}

func TestStaysWithoutTheDriver(t *testing.T) {
	g := NewWithT(t)
	startManager(t, g)
	// No CSINode at all yet, then one whose driver list is empty.
	node(t, g, "waiting", startuptaint.Taint)
	g.Consistently(func(g Gomega) bool { return hasStartupTaint(g, "waiting") }, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
	csiNode(t, g, "waiting")
	g.Consistently(func(g Gomega) bool { return hasStartupTaint(g, "waiting") }, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
}

// staleClient answers Gets of Nodes with the copy it was given: a cache that has not
// seen the Node's latest write.
type staleClient struct {
	client.Client
	node *corev1.Node
}

func (c staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n, ok := obj.(*corev1.Node); ok && key.Name == c.node.Name {
		c.node.DeepCopyInto(n)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func TestStaleReadKeepsANewerTaint(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	node(t, g, "stale", startuptaint.Taint)
	csiNode(t, g, "stale", knestcsi.DriverName)
	stale := &corev1.Node{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: "stale"}, stale)).To(Succeed())
	// Someone taints the Node after the reconciler's cache saw it.
	g.Eventually(func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: "stale"}, n); err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, userTaint)
		return env.Client.Update(ctx, n)
	}).Should(Succeed())

	r := &startuptaint.Reconciler{Client: staleClient{Client: env.Client, node: stale}}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "stale"}})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a stale read must conflict, not overwrite: %v", err)
	g.Expect(taints(g, "stale")).To(ContainElements(userTaint, startuptaint.Taint))

	// Read again, it removes its own taint only.
	r = &startuptaint.Reconciler{Client: env.Client}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "stale"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints(g, "stale")).To(And(ContainElement(userTaint), Not(ContainElement(startuptaint.Taint))))
}
