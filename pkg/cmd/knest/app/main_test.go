package app_test

// Integration tests of the knest CLI against a real API server (internal/testenv:
// etcd, kube-apiserver and kube-controller-manager with the real CRDs). The tests
// run the CLI through app.RunContext with captured streams and a kubeconfig file,
// and play the knest controller themselves by writing NestedCluster status.

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/cmd/knest/app"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

// env is started once for the package; each test works in its own namespace.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "knest-cli-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(t.Context(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// syncBuffer is a bytes.Buffer safe to read while the command writes to it.
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

type result struct {
	stdout, stderr string
	err            error
}

// knest runs the CLI against the test bed's API server.
func knest(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := start(t, stdin, args...)
	return r.wait()
}

type running struct {
	out, errOut *syncBuffer
	done        chan error
}

func (r *running) wait() result {
	err := <-r.done
	return result{stdout: r.out.String(), stderr: r.errOut.String(), err: err}
}

// start runs the CLI in the background; wait() collects the result. It talks to the
// test bed as its admin unless args name another --kubeconfig.
func start(t *testing.T, stdin string, args ...string) *running {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	r := &running{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: r.out, ErrOut: r.errOut}
	if !slices.Contains(args, "--kubeconfig") {
		args = append(args, "--kubeconfig", env.KubeconfigPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	go func() {
		defer cancel()
		r.done <- app.RunContext(ctx, cli.NewLogger(r.errOut, 0).Logr(), streams, args)
	}()
	return r
}

func getCluster(g Gomega, ctx context.Context, ns, name string) *knestv1.NestedCluster {
	nc := &knestv1.NestedCluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nc)).To(Succeed())
	return nc
}

// eventuallyCluster waits for the NestedCluster to exist and returns it.
func eventuallyCluster(t *testing.T, ns, name string) *knestv1.NestedCluster {
	t.Helper()
	nc := &knestv1.NestedCluster{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, nc)
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	return nc
}

// setStatus plays the controller: it writes status onto the NestedCluster.
func setStatus(t *testing.T, ns, name string, mutate func(nc *knestv1.NestedCluster)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		nc := &knestv1.NestedCluster{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, nc); err != nil {
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
