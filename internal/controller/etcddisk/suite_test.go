package etcddisk_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/controller/etcddisk"
	"github.com/knest-dev/knest/internal/testenv"
)

// The tests in this package run the etcd-disk controller alone against a real
// kube-apiserver, etcd and kube-controller-manager (garbage collection) with the
// real KubeVirt CRDs; the tests create the VMs CAPK would.

var env *testenv.Env

func TestMain(m *testing.M) {
	// The controller's log goes to the test output, which go test shows on failure.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// startController runs the etcd-disk controller until the test ends.
func startController(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	// Each test builds a manager of its own; controller-runtime would refuse the name twice.
	if err := (&etcddisk.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatalf("failed to set up the controller: %v", err)
	}
	testenv.RunManager(t, mgr)
}

// namespace creates a tenant namespace of the test's own.
func namespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func newCluster(ns, name string) *knestv1.NestedCluster {
	return &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{
			{Name: "workers"},
		}},
	}
}

// get reads obj fresh from the API server.
func get(g Gomega, obj client.Object) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)
