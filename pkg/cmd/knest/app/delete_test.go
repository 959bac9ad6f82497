package app_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

const holdFinalizer = "test.knest.dev/hold"

func gone(t *testing.T, ns, name string) func() bool {
	return func() bool {
		err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &knestv1.NestedCluster{})
		return apierrors.IsNotFound(err)
	}
}

func TestDelete(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "one", "-n", ns, "--wait=false").err).To(Succeed())
	g.Expect(knest(t, "", "create", "two", "-n", ns, "--wait=false").err).To(Succeed())

	r := knest(t, "", "delete", "one", "two", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(gone(t, ns, "one")()).To(BeTrue())
	g.Expect(gone(t, ns, "two")()).To(BeTrue())
	g.Expect(lines(r.stderr)).To(ContainElements("✓ cluster one deleted", "✓ cluster two deleted"))

	r = knest(t, "", "delete", "one", "-n", ns)
	g.Expect(r.err).To(MatchError("cluster one not found in namespace " + ns))
	r = knest(t, "", "delete", "one", "-n", ns, "--ignore-not-found")
	g.Expect(r.err).NotTo(HaveOccurred())
}

func TestDeleteWaitsForTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false").err).To(Succeed())
	// Stand in for the controller's finalizer, which holds the cluster until every
	// host object is gone.
	nc := getCluster(g, t.Context(), ns, "demo")
	nc.Finalizers = append(nc.Finalizers, holdFinalizer)
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())

	run := start(t, "", "delete", "demo", "-n", ns, "--timeout", "1m")
	g.Eventually(func() bool { return getCluster(g, t.Context(), ns, "demo").DeletionTimestamp != nil }, 10*time.Second).Should(BeTrue())
	g.Consistently(run.done, 2*time.Second).ShouldNot(Receive(), "delete waits while the finalizer holds the cluster")

	nc = getCluster(g, t.Context(), ns, "demo")
	nc.Finalizers = nil
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())
	r := run.wait()
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(lines(r.stderr)).To(ContainElement("✓ cluster demo deleted"))
	g.Expect(gone(t, ns, "demo")()).To(BeTrue())
}

func TestDeleteTimesOut(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false").err).To(Succeed())
	nc := getCluster(g, t.Context(), ns, "demo")
	nc.Finalizers = append(nc.Finalizers, holdFinalizer)
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())
	t.Cleanup(func() {
		nc := &knestv1.NestedCluster{}
		if env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "demo"}, nc) == nil {
			nc.Finalizers = nil
			_ = env.Client.Update(t.Context(), nc)
		}
	})

	r := knest(t, "", "delete", "demo", "-n", ns, "--timeout", "2s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be deleted: finalizers " + holdFinalizer + " remain")))
	g.Expect(r.stderr).To(ContainSubstring("✗ cluster demo is still there after 2s"))

	// Without --wait the command returns at once.
	r = knest(t, "", "delete", "demo", "-n", ns, "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred())
}
