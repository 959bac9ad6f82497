package jointoken_test

import (
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/internal/testenv"
)

// The tests in this package run the join token controller against a real
// kube-apiserver (bootstrap token authentication on, as kubeadm's) with the real
// Cluster API CRDs; the tests create the Machines and KubeadmConfigs Cluster API
// would, and the bed is the tenant too: the kubeconfig Secret points at it.

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

const (
	timeout  = time.Minute
	interval = 100 * time.Millisecond
)
