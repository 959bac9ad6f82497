package etcdbackup_test

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
	"github.com/knest-dev/knest/internal/controller/etcdbackup"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/internal/testenv"
)

// The tests in this package run the backup controller alone against a real
// kube-apiserver, etcd and kube-controller-manager with the real CRDs. What other
// controllers would make (the cluster's CAs, its HostedControlPlane) and what no
// kubelet runs here (backup pods, Jobs ending) the tests write themselves.

var env *testenv.Env

func TestMain(m *testing.M) {
	// The controller's log goes to the test output, which go test shows on failure.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// startController runs the backup controller until the test ends.
func startController(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// As knest's manager (internal/manager): Secrets are read uncached.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	r := &etcdbackup.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Image: testToolImage,
		Tenants: &tenant.KubeconfigReader{Reader: mgr.GetAPIReader(), Timeout: 10 * time.Second, Every: 5 * time.Second},
	}
	// Each test builds a manager of its own; controller-runtime would refuse the name twice.
	if err := r.SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
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

func update(g Gomega, nc *knestv1.NestedCluster, mutate func(*knestv1.NestedCluster)) {
	g.Eventually(func() error {
		get(g, nc)
		mutate(nc)
		return env.Client.Update(context.Background(), nc)
	}, timeout, interval).Should(Succeed())
}

// testToolImage is the image backup Jobs are given; no kubelet runs them here.
const testToolImage = "knest.local/knest:test"

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)
