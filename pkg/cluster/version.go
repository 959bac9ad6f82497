package cluster

import (
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/kubever"
)

// PoolVersion is the Kubernetes version a pool's machines run: the pool's own when
// it is held back, never newer than spec.version (which the controller lowers to the
// version still rolling out while an upgrade is held).
func PoolVersion(nc *knestv1.NestedCluster, p knestv1.WorkerPool) string {
	if p.Version == "" {
		return nc.Spec.Version
	}
	return kubever.Older(p.Version, nc.Spec.Version)
}
