// Package admission_test runs the admission policy beside it in a real kube-apiserver:
// the API server, with the host's list of node images, refuses NestedClusters at
// versions that have none.
package admission_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/kubever"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// apply creates the objects of a manifest of knest's config.
func apply(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := env.Apply(t.Context(), path, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return objs
}

func cluster(ns, name, version string) *knestv1.NestedCluster {
	return &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: knestv1.NestedClusterSpec{Version: version, Workers: []knestv1.WorkerPool{
			{Name: "workers", Replicas: ptr.To[int32](1)},
			{Name: "gpu", Replicas: ptr.To[int32](0)},
		}},
	}
}

// message is what the CLI says (pkg/kubever), which the policy must say too.
func message(version, listed string) string {
	return kubever.NoNodeImageMessage(version, kubever.ParseNodeVersions(listed))
}

func TestNodeVersionsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "knest-system"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}})).To(Succeed())
	apply(t, "config/admission/node_versions_policy.yaml")

	// Without the host's list every version the CRD allows is admitted. The policy
	// takes effect asynchronously; a create refused later would be the list's doing.
	g.Expect(env.Client.Create(ctx, cluster("tenants", "unlisted", "v1.36.0"))).To(Succeed())

	cm := apply(t, "config/manager/node_versions.yaml")[0]
	listed := "v1.34.4 v1.35.4"
	g.Expect(cm.Object["data"]).To(HaveKeyWithValue("versions", listed), "the list this release ships")

	// Once the policy and its parameter are in force, a version without an image is refused.
	g.Eventually(func() error {
		err := env.Client.Create(ctx, cluster("tenants", "probe", "v1.36.0"))
		if err == nil {
			_ = env.Client.Delete(ctx, cluster("tenants", "probe", ""))
		}
		return err
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(message("v1.36.0", listed))))

	t.Run("a listed version is admitted", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Client.Create(ctx, cluster("tenants", "listed", "v1.35.4"))).To(Succeed())
	})

	t.Run("an upgrade to an unlisted version is refused", func(t *testing.T) {
		g := NewWithT(t)
		nc := cluster("tenants", "upgrade", "v1.35.4")
		g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
		nc.Spec.Version = "v1.35.5"
		g.Expect(env.Client.Update(ctx, nc)).To(MatchError(ContainSubstring(message("v1.35.5", listed))))
	})

	t.Run("a pool held at an unlisted version is refused", func(t *testing.T) {
		g := NewWithT(t)
		nc := cluster("tenants", "held", "v1.35.4")
		nc.Spec.Workers[1].Version = "v1.34.3"
		err := env.Client.Create(ctx, nc)
		g.Expect(err).To(MatchError(ContainSubstring(message("v1.34.3", listed))))
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		nc.Spec.Workers[1].Version = "v1.34.4"
		g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	})

	t.Run("a retired version keeps running clusters changeable", func(t *testing.T) {
		g := NewWithT(t)
		nc := cluster("tenants", "retired", "v1.34.4")
		nc.Spec.Workers[1].Version = "v1.34.4"
		g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
		// The host retires v1.34.4's image; the cluster can still be scaled.
		u := cm
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
		g.Expect(unstructured.SetNestedField(u.Object, "v1.35.4", "data", "versions")).To(Succeed())
		g.Expect(env.Client.Update(ctx, u)).To(Succeed())
		g.Eventually(func() error {
			return env.Client.Create(ctx, cluster("tenants", "probe-retired", "v1.34.4"))
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(message("v1.34.4", "v1.35.4"))))

		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc)).To(Succeed())
		nc.Spec.Workers[0].Replicas = ptr.To[int32](3)
		g.Expect(env.Client.Update(ctx, nc)).To(Succeed(), "scaling a cluster whose version was retired")
		nc.Spec.Workers[1].Version = ""
		g.Expect(env.Client.Update(ctx, nc)).To(Succeed(), "releasing a held pool to spec.version")
		nc.Spec.Version = "v1.35.4"
		g.Expect(env.Client.Update(ctx, nc)).To(Succeed(), "upgrading to a listed version")

		// An empty list admits no version; a ConfigMap without the key checks nothing,
		// as the CLI does.
		g.Expect(unstructured.SetNestedField(u.Object, "", "data", "versions")).To(Succeed())
		g.Expect(env.Client.Update(ctx, u)).To(Succeed())
		g.Eventually(func() error {
			return env.Client.Create(ctx, cluster("tenants", "probe-empty", "v1.35.4"))
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(message("v1.35.4", ""))))
		unstructured.RemoveNestedField(u.Object, "data", "versions")
		g.Expect(env.Client.Update(ctx, u)).To(Succeed())
		g.Eventually(func() error {
			err := env.Client.Create(ctx, cluster("tenants", "probe-nokey", "v1.36.0"))
			if err == nil {
				_ = env.Client.Delete(ctx, cluster("tenants", "probe-nokey", ""))
			}
			return err
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
}
