package etcdbackup_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	// As knest's manager (internal/manager): Secrets are read uncached.
	opts := ctrl.Options{Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}}
	env.StartManager(t, opts, func(mgr ctrl.Manager, copts controller.Options) error {
		r := &etcdbackup.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Image: testToolImage,
			Tenants: &tenant.KubeconfigReader{Reader: mgr.GetAPIReader(), Timeout: 10 * time.Second, Every: 5 * time.Second},
		}
		return r.SetupWithManager(mgr, copts)
	})
}

// namespace creates a tenant namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateTenantNamespace(t, env.Client, "t-")
}

func update(g Gomega, nc *knestv1.NestedCluster, mutate func(*knestv1.NestedCluster)) {
	g.Eventually(func() error {
		env.Get(g, nc)
		mutate(nc)
		return env.Client.Update(context.Background(), nc)
	}, timeout, interval).Should(Succeed())
}

// testToolImage is the image backup Jobs are given; no kubelet runs them here.
const testToolImage = "knest.local/knest:test"

const (
	// timeout bounds a wait for what the controllers do; a minute, for a bed that shares
	// the machine with emulated VMs (a wait that succeeds ends sooner).
	timeout  = time.Minute
	interval = 100 * time.Millisecond
)
