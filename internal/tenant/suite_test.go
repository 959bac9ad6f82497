package tenant_test

// Tests of the tenant helpers against a real API server (internal/testenv): the
// namespace check and watch read Namespaces and NestedClusters, the identity reader
// reads a kubeconfig Secret and then the tenant's API.

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knest-dev/knest/internal/testenv"
)

// env is started once for the package; each test works in namespaces of its own.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// newNamespace creates a namespace with labels, deleted when the test ends.
func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-", Labels: labels}}
	NewWithT(t).Expect(env.Client.Create(t.Context(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}
