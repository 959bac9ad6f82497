package knest_test

// Tests of the library against a real API server (internal/testenv: etcd,
// kube-apiserver and kube-controller-manager with the real CRDs). No knest
// controller runs: the tests write the NestedCluster status it would.

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/knest"
)

// env is started once for the package; each test works in its own namespace.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// syncBuffer is a bytes.Buffer safe to read while a call writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newClient is a library client of the test bed whose status lines go to the
// returned buffer.
func newClient(t *testing.T) (*knest.Client, *syncBuffer) {
	t.Helper()
	return newClientAs(t, env.Config, 0)
}

// newClientAs is newClient for the identity of cfg; verbosity 1 adds the debug lines
// (what -v 1 shows).
func newClientAs(t *testing.T, cfg *rest.Config, verbosity int) (*knest.Client, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	c, err := knest.NewClientForConfig(cfg, knest.WithLogger(cli.NewLogger(out, verbosity).Logr()))
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	return c, out
}

// lines returns the non-empty lines of s, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "knest-lib-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(t.Context(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
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
	NewWithT(t).Eventually(func() error {
		nc := &knestv1.NestedCluster{}
		if err := env.Client.Get(t.Context(), key, nc); err != nil {
			return err
		}
		mutate(nc)
		return env.Client.Status().Update(t.Context(), nc)
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

func condition(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

// ready is the status of a cluster that reached its spec.
func ready(nc *knestv1.NestedCluster) {
	nc.Status.ObservedGeneration = nc.Generation
	nc.Status.Phase = knestv1.PhaseRunning
	nc.Status.Endpoint = "https://" + nc.Name + "-lb." + nc.Namespace + ".svc:6443"
	n := nc.Spec.ControlPlane.Replicas
	nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: n, Ready: n, Current: n, UpToDate: n}
	nc.Status.Version = nc.Spec.Version
	nc.Status.Workers = nil
	for _, p := range nc.Spec.Workers {
		n := *p.Replicas
		nc.Status.Workers = append(nc.Status.Workers, knestv1.PoolStatus{Name: p.Name, Version: cluster.PoolVersion(nc, p),
			ReplicaStatus: knestv1.ReplicaStatus{Desired: n, Ready: n, Current: n, UpToDate: n}})
	}
	nc.Status.Conditions = []metav1.Condition{
		condition(knestv1.ReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
		condition(knestv1.ControlPlaneReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
		condition(knestv1.WorkersReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
	}
}

// createMachine creates a Cluster API Machine of pool the way a MachineDeployment
// rendered by knest would, with its Node joined under the same name.
func createMachine(t *testing.T, ns, clusterName, pool, name string) {
	t.Helper()
	g := NewWithT(t)
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName, knestv1.ClusterNameLabel: clusterName}
	if pool == knestv1.ControlPlanePool {
		labels[clusterv1.MachineControlPlaneLabel] = ""
		labels[knestv1.PoolNameLabel] = knestv1.ControlPlanePool
	} else {
		labels[knestv1.PoolNameLabel] = pool
		labels[clusterv1.MachineDeploymentNameLabel] = cluster.PoolName(clusterName, pool)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: name,
			},
		},
	}
	g.Expect(env.Client.Create(t.Context(), m)).To(Succeed())
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
	g.Expect(env.Client.Status().Update(t.Context(), m)).To(Succeed())
}
