package knest_test

// Tests of the library against a real API server (internal/testenv: etcd,
// kube-apiserver and kube-controller-manager with the real CRDs). No knest
// controller runs: the tests write the NestedCluster status it would.

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
)

// env is started once for the package; each test works in its own namespace.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// newClient is a library client of the test bed whose status lines go to the
// returned buffer.
func newClient(t *testing.T) (*knest.Client, *knesttest.SyncBuffer) {
	t.Helper()
	return newClientAs(t, env.Config, 0)
}

// newClientAs is newClient for the identity of cfg; verbosity 1 adds the debug lines
// (what -v 1 shows).
func newClientAs(t *testing.T, cfg *rest.Config, verbosity int) (*knest.Client, *knesttest.SyncBuffer) {
	t.Helper()
	out := &knesttest.SyncBuffer{}
	c, err := knest.NewClientForConfig(cfg, knest.WithLogger(cli.NewLogger(out, verbosity).Logr()))
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	return c, out
}

// newNamespace creates a tenant namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	return knesttest.NewNamespace(t, env.Client, "knest-lib-")
}

// createCluster creates NestedCluster demo with pools of the given sizes, in order.
func createCluster(t *testing.T, ns string, pools ...knestv1.WorkerPool) client.ObjectKey {
	t.Helper()
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}, Spec: knestv1.NestedClusterSpec{Workers: pools}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), nc)).To(Succeed())
	return client.ObjectKeyFromObject(nc)
}

func pool(name string, replicas int32) knestv1.WorkerPool {
	return knestv1.WorkerPool{Name: name, Replicas: ptr.To(replicas)}
}

func getCluster(g Gomega, ctx context.Context, key client.ObjectKey) *knestv1.NestedCluster {
	nc := &knestv1.NestedCluster{}
	g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
	return nc
}

// setStatus plays the controller: it writes status onto the NestedCluster.
func setStatus(t *testing.T, key client.ObjectKey, mutate func(nc *knestv1.NestedCluster)) {
	t.Helper()
	knesttest.SetStatus(t, env.Client, key, mutate)
}

// createMachine creates a Cluster API Machine of pool the way a MachineDeployment
// rendered by knest would, with its Node joined under the same name.
func createMachine(t *testing.T, ns, clusterName, pool, name string) {
	t.Helper()
	knesttest.CreateMachine(t, env.Client, ns, clusterName, pool, name, "")
	knesttest.JoinNode(t, env.Client, ns, name, false)
}
