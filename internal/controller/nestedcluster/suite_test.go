package nestedcluster_test

import (
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
)

// The tests in this package run the real controller against a real kube-apiserver,
// etcd and kube-controller-manager (garbage collection) with the real Cluster API,
// CAPK and KubeVirt CRDs. Cluster API's own reconcilers do not run here: where a test
// needs their progress, it writes their status itself.

var env *testenv.Env

func TestMain(m *testing.M) {
	// The controller's log goes to the test output, which go test shows on failure.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// startController runs the controller until the returned stop function is called
// (and at the latest when the test ends).
func startController(t *testing.T) (stop func()) {
	t.Helper()
	return startControllerWith(t, env.Config, manager.Options{Concurrency: 4, ToolImage: testToolImage})
}

func startControllerWith(t *testing.T, cfg *rest.Config, opts manager.Options) (stop func()) {
	t.Helper()
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	return testenv.RunManager(t, mgr)
}

// namespace creates a tenant namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateTenantNamespace(t, env.Client, "t-")
}

// testToolImage is the image backup Jobs are given; no kubelet runs them here.
const testToolImage = "knest.local/knest:test"

const (
	// timeout bounds a wait for what the controllers do; a minute, for a bed that shares
	// the machine with emulated VMs (a wait that succeeds ends sooner).
	timeout  = time.Minute
	interval = 100 * time.Millisecond
)
