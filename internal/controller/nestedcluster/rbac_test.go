package nestedcluster_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/manager"
)

// TestRunsWithOnlyItsOwnRBAC runs the controller as the service account of
// config/rbac, with leader election as config/manager runs it: what the generated
// roles grant must be enough to build a cluster, and no more than knest needs for
// leases.
func TestRunsWithOnlyItsOwnRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, sa = "knest-system", "system:serviceaccount:knest-system:knest-controller"
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	for _, file := range []string{"role.yaml", "service_account.yaml"} {
		for _, obj := range readManifests(g, filepath.Join("..", "..", "..", "config", "rbac", file)) {
			g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, obj))).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteUserKubeconfig(kubeconfig, sa, "system:serviceaccounts", "system:serviceaccounts:"+ns)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// Node heartbeats and other components' leader leases are out of reach.
	for _, other := range []string{"kube-system", "kube-node-lease", "default"} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "knest-probe"}}
		g.Expect(as.Create(ctx, lease)).To(Satisfy(apierrors.IsForbidden), "create a Lease in %s", other)
	}

	stop := startControllerWith(t, cfg, manager.Options{Concurrency: 2, LeaderElection: true, LeaderElectionNamespace: ns})
	nc := newCluster(namespace(t, g), "rbac")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	waitForGraph(g, nc)
	g.Eventually(func(g Gomega) {
		get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseProvisioning))
	}, timeout, interval).Should(Succeed())

	// Stopping hands the lease over at once.
	stop()
	lease := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "knest-controller.knest.dev"}, lease)).To(Succeed())
	g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(BeEmpty())
}

// readManifests decodes every object of a multi-document YAML file.
func readManifests(g Gomega, path string) []*unstructured.Unstructured {
	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred(), path)
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}
