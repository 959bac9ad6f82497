package backup

import (
	"fmt"
	"slices"
	"strings"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Refusal says why a restore of snap cannot be done at all; "" when it can. The
// CLI asks before it writes the request, the controller again before it acts.
func Refusal(nc *knestv1.NestedCluster, snap string) string {
	st := nc.Status.Backup
	switch {
	case !ValidSnapshotName(snap):
		return fmt.Sprintf("%q is not a snapshot name (they look like 20261127T091500Z.db)", snap)
	case !slices.Contains(st.Snapshots, snap):
		return fmt.Sprintf("the backup volume has no snapshot %s; it has: %s", snap, listOrNone(st.Snapshots))
	case nc.Spec.ControlPlane.Etcd.Ephemeral:
		return "controlPlane.etcd.ephemeral: etcd has no volume to restore into"
	case !nc.Spec.ControlPlane.IsHosted() && nc.Spec.ControlPlane.Replicas != 1:
		return fmt.Sprintf("a VM control plane is restored with one node, and it has %d: scale controlPlane.replicas to 1, restore, then scale up again", nc.Spec.ControlPlane.Replicas)
	}
	return ""
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none yet"
	}
	if len(names) > 5 {
		return "..., " + strings.Join(names[len(names)-5:], ", ")
	}
	return strings.Join(names, ", ")
}
