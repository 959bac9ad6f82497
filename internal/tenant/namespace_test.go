package tenant_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/internal/testenv"
)

func TestCheckNamespace(t *testing.T) {
	g := NewWithT(t)
	enabled := newNamespace(t, map[string]string{knestv1.TenantNamespaceLabel: "true"})
	g.Expect(tenant.CheckNamespace(t.Context(), env.Client, enabled)).To(Succeed())

	// Without the label, or with another value, the namespace is not for tenants.
	for _, labels := range []map[string]string{nil, {knestv1.TenantNamespaceLabel: "false"}, {"knest.dev/tenant": "true"}} {
		ns := newNamespace(t, labels)
		err := tenant.CheckNamespace(t.Context(), env.Client, ns)
		var notEnabled *tenant.NamespaceNotEnabledError
		g.Expect(errors.As(err, &notEnabled)).To(BeTrue(), "labels %v: %v", labels, err)
		g.Expect(notEnabled.Namespace).To(Equal(ns))
		g.Expect(err).To(MatchError("namespace " + ns + " is not enabled for tenants, so knest creates nothing in it: " +
			"a host admin enables it with `kubectl label namespace " + ns + " knest.dev/tenants=true`"))
	}

	// A namespace that does not exist is the API server's error, not a verdict.
	err := tenant.CheckNamespace(t.Context(), env.Client, "no-such-namespace")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

// recorder is a reconciler that only records what it was asked to reconcile.
type recorder struct {
	mu   sync.Mutex
	seen []reconcile.Request
}

func (r *recorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req)
	return reconcile.Result{}, nil
}

// take returns what was reconciled since the last call.
func (r *recorder) take() []reconcile.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

func TestWatchNamespacesReconcilesTheClustersOfANamespaceWhoseLabelsChange(t *testing.T) {
	g := NewWithT(t)
	ns, other := newNamespace(t, nil), newNamespace(t, nil)
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: "a"}, {Namespace: ns, Name: "b"}, {Namespace: other, Name: "c"}} {
		nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		g.Expect(env.Client.Create(t.Context(), nc)).To(Succeed())
	}
	request := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	// The NestedClusters' own events are filtered out: what is reconciled comes
	// from the namespace watch alone.
	b := ctrl.NewControllerManagedBy(mgr).Named("watchnamespaces").
		For(&knestv1.NestedCluster{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(client.Object) bool { return false })))
	rec := &recorder{}
	g.Expect(tenant.WatchNamespaces(b, mgr.GetClient()).Complete(rec)).To(Succeed())
	testenv.RunManager(t, mgr)

	// The informer's first listing counts as a change; let it pass.
	g.Eventually(func(g Gomega) {
		g.Expect(rec.take()).To(ContainElements(request(ns, "a"), request(ns, "b"), request(other, "c")))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(rec.take, time.Second, 100*time.Millisecond).Should(BeEmpty())

	// An annotation is no reason to reconcile.
	patchNamespace(t, ns, func(n *corev1.Namespace) { n.Annotations = map[string]string{"example.com/note": "x"} })
	g.Consistently(rec.take, 2*time.Second, 100*time.Millisecond).Should(BeEmpty())

	// Enabling the namespace resumes its clusters, and only its.
	patchNamespace(t, ns, func(n *corev1.Namespace) { n.Labels[knestv1.TenantNamespaceLabel] = "true" })
	var seen []reconcile.Request
	g.Eventually(func() []reconcile.Request {
		seen = append(seen, rec.take()...)
		return seen
	}, 10*time.Second, 100*time.Millisecond).Should(ContainElements(request(ns, "a"), request(ns, "b")))
	g.Consistently(func() []reconcile.Request {
		seen = append(seen, rec.take()...)
		return seen
	}, time.Second, 100*time.Millisecond).ShouldNot(ContainElement(request(other, "c")))
}

func patchNamespace(t *testing.T, name string, mutate func(*corev1.Namespace)) {
	t.Helper()
	g := NewWithT(t)
	n := &corev1.Namespace{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: name}, n)).To(Succeed())
	orig := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	mutate(n)
	g.Expect(env.Client.Patch(t.Context(), n, client.MergeFrom(orig))).To(Succeed())
}
