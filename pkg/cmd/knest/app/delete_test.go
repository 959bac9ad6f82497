package app_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

// What Delete does and waits for is pkg/knest's (delete_test.go there); here, that
// the names, --ignore-not-found, --wait and --timeout make the request and what the
// command prints.

func gone(t *testing.T, ns, name string) func() bool {
	return func() bool {
		err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &knestv1.NestedCluster{})
		return apierrors.IsNotFound(err)
	}
}

func TestDeleteFlagsMakeTheRequest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "one", "-n", ns, "--wait=false").err).To(Succeed())
	g.Expect(knest(t, "", "create", "two", "-n", ns, "--wait=false").err).To(Succeed())

	r := knest(t, "", "delete", "one", "nope", "two", "-n", ns, "--ignore-not-found")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(gone(t, ns, "one")()).To(BeTrue())
	g.Expect(gone(t, ns, "two")()).To(BeTrue())
	g.Expect(knesttest.Lines(r.stderr)).To(ContainElements("✓ cluster one deleted", "✓ cluster two deleted"))

	r = knest(t, "", "delete", "one", "-n", ns)
	g.Expect(r.err).To(MatchError("cluster one not found in namespace " + ns))
	g.Expect(knesttest.Lines(r.stderr)).To(Equal([]string{"ERROR: cluster one not found in namespace " + ns}))
}

func TestDeleteWaitFlags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false").err).To(Succeed())
	// A finalizer keeps the cluster, as the controller's does until the host is clean.
	nc := getCluster(g, t.Context(), ns, "demo")
	nc.Finalizers = append(nc.Finalizers, "test.knest.dev/hold")
	g.Expect(env.Client.Update(t.Context(), nc)).To(Succeed())
	t.Cleanup(func() {
		nc := &knestv1.NestedCluster{}
		if env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, nc) == nil {
			nc.Finalizers = nil
			_ = env.Client.Update(context.Background(), nc)
		}
	})

	r := knest(t, "", "delete", "demo", "-n", ns, "--timeout", "1s")
	g.Expect(r.err).To(MatchError(ContainSubstring("timed out after 1s waiting for cluster demo to be deleted")))
	g.Expect(r.stderr).To(ContainSubstring("\nERROR: timed out after 1s"))

	// Without --wait the command returns at once.
	r = knest(t, "", "delete", "demo", "-n", ns, "--wait=false")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(knesttest.Lines(r.stderr)).To(Equal([]string{"✓ deletion of cluster demo requested"}))
	g.Expect(gone(t, ns, "demo")()).To(BeFalse())
}
