package knest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
	"github.com/knest-dev/knest/pkg/knest"
)

// holdFinalizer stands in for the controller's finalizer, which holds a cluster until
// every host object is gone.
const holdFinalizer = "test.knest.dev/hold"

func gone(t *testing.T, key client.ObjectKey) bool {
	err := env.Client.Get(t.Context(), key, &knestv1.NestedCluster{})
	return apierrors.IsNotFound(err)
}

// hold adds holdFinalizer to the cluster and takes it off when the test ends.
func hold(t *testing.T, key client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	nc := getCluster(g, t.Context(), key)
	nc.Finalizers = append(nc.Finalizers, holdFinalizer)
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())
	t.Cleanup(func() { _ = release(context.Background(), key) })
}

func release(ctx context.Context, key client.ObjectKey) error {
	nc := &knestv1.NestedCluster{}
	if err := env.Client.Get(ctx, key, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	nc.Finalizers = nil
	return env.Client.Update(ctx, nc)
}

func TestDeleteRequestsEveryDeletionAndReportsEachError(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	one := createAt(t, ns, "one", knestv1.DefaultVersion, pool("workers", 1))
	two := createAt(t, ns, "two", knestv1.DefaultVersion, pool("workers", 1))
	c, out := newClient(t)

	g.Expect(c.Delete(t.Context(), ns, []string{"one", "two"}, knest.DeleteWithWait(time.Minute))).To(Succeed())
	g.Expect(gone(t, one)).To(BeTrue())
	g.Expect(gone(t, two)).To(BeTrue())
	g.Expect(knesttest.Lines(out.String())).To(ContainElements("✓ cluster one deleted", "✓ cluster two deleted"))

	g.Expect(c.Delete(t.Context(), ns, []string{"one"})).To(MatchError("cluster one not found in namespace " + ns))
	g.Expect(c.Delete(t.Context(), ns, []string{"one"}, knest.DeleteIgnoreNotFound(true))).To(Succeed())

	// A missing cluster stops neither the others' deletion nor the report of the
	// next error.
	three := createAt(t, ns, "three", knestv1.DefaultVersion, pool("workers", 1))
	err := c.Delete(t.Context(), ns, []string{"one", "three", "two"}, knest.DeleteWithWait(time.Minute))
	g.Expect(err).To(MatchError("cluster one not found in namespace " + ns + "\ncluster two not found in namespace " + ns))
	g.Expect(gone(t, three)).To(BeTrue())
}

func TestDeleteWaitsForTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", knestv1.DefaultVersion, pool("workers", 1))
	hold(t, key)
	c, out := newClient(t)

	done := make(chan error, 1)
	go func() { done <- c.Delete(t.Context(), ns, []string{"demo"}, knest.DeleteWithWait(time.Minute)) }()
	g.Eventually(func() bool { return getCluster(g, t.Context(), key).DeletionTimestamp != nil }, 10*time.Second).Should(BeTrue())
	g.Consistently(done, 2*time.Second).ShouldNot(Receive(), "Delete waits while the finalizer holds the cluster")

	g.Expect(release(t.Context(), key)).To(Succeed())
	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	g.Expect(knesttest.Lines(out.String())).To(ContainElement("✓ cluster demo deleted"))
	g.Expect(gone(t, key)).To(BeTrue())
}

func TestDeleteTimesOut(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createAt(t, ns, "demo", knestv1.DefaultVersion, pool("workers", 1))
	hold(t, key)
	c, out := newClient(t)

	err := c.Delete(t.Context(), ns, []string{"demo"}, knest.DeleteWithWait(2*time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("timed out after 2s waiting for cluster demo to be deleted: finalizers " + holdFinalizer + " remain")))
	g.Expect(out.String()).To(ContainSubstring("✗ cluster demo is still there after 2s"))

	// Without a wait Delete returns once the deletion is requested.
	c, out = newClient(t)
	g.Expect(c.Delete(t.Context(), ns, []string{"demo"})).To(Succeed())
	g.Expect(knesttest.Lines(out.String())).To(Equal([]string{"✓ deletion of cluster demo requested"}))
	g.Expect(gone(t, key)).To(BeFalse())
}
