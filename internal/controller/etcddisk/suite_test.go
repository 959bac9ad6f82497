package etcddisk_test

import (
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	env.StartManager(t, ctrl.Options{}, func(mgr ctrl.Manager, opts controller.Options) error {
		return (&etcddisk.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, opts)
	})
}

// namespace creates a tenant namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateTenantNamespace(t, env.Client, "t-")
}

const (
	// timeout bounds a wait for what the controllers do; a minute, for a bed that shares
	// the machine with emulated VMs (a wait that succeeds ends sooner).
	timeout  = time.Minute
	interval = 100 * time.Millisecond
)
