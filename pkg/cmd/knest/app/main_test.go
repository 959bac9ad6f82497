package app_test

// Integration tests of the knest CLI against a real API server (internal/testenv:
// etcd, kube-apiserver and kube-controller-manager with the real CRDs). The tests
// run the CLI through app.RunContext with captured streams and a kubeconfig file,
// and play the knest controller themselves by writing NestedCluster status.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cmd/knest/app"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

// env is started once for the package; each test works in its own namespace.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// newNamespace creates a tenant namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	return knesttest.NewNamespace(t, env.Client, "knest-cli-")
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
	out, errOut *knesttest.SyncBuffer
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
	r := &running{out: &knesttest.SyncBuffer{}, errOut: &knesttest.SyncBuffer{}, done: make(chan error, 1)}
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
	knesttest.SetStatus(t, env.Client, client.ObjectKey{Namespace: ns, Name: name}, mutate)
}
