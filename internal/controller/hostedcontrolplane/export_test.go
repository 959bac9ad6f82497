package hostedcontrolplane

import (
	"testing"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
)

// For the tests that run the manager (package hostedcontrolplane_test): the test
// bed TestMain started, and a control plane as Cluster API makes it.

func Env() *testenv.Env { return env }

func NewControlPlane(t *testing.T, g Gomega, name string) (*clusterv1.Cluster, *hcpv1.HostedControlPlane) {
	t.Helper()
	return newControlPlane(t, g, name)
}
