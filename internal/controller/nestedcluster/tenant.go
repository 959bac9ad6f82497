package nestedcluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// tenantState is what a read of the tenant's identity found.
type tenantState struct {
	id  string
	err error
}

// observeTenant reads the tenant's identity once its control plane is initialized,
// and records it the first time.
func (r *Reconciler) observeTenant(ctx context.Context, s *scope) {
	if r.Tenants == nil || s.controlPlane == nil || !s.controlPlane.initialized {
		return
	}
	id, err := r.Tenants.TenantID(ctx, s.nc)
	s.tenant = &tenantState{id: id, err: err}
	if err == nil && s.nc.Status.TenantID == "" {
		s.nc.Status.TenantID = id
	}
}

// stateLost: the tenant answers as another cluster than the one knest first saw.
func (s *scope) stateLost() bool {
	return s.tenant != nil && s.tenant.err == nil && s.nc.Status.TenantID != "" && s.tenant.id != s.nc.Status.TenantID
}

func setTenantStateCondition(nc *knestv1.NestedCluster, s *scope) {
	cond := metav1.Condition{Type: knestv1.TenantStateCondition}
	switch {
	case s.tenant == nil:
		// Not initialized yet, or no reader: nothing to say.
		return
	case s.tenant.err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, knestv1.StateUnknownReason, s.tenant.err.Error()
	case s.stateLost():
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.StateLostReason
		cond.Message = fmt.Sprintf("The control plane came back without the tenant's state: its kube-system namespace is %s, not %s. "+
			"Its objects are gone and nodes cannot rejoin: %s, or delete and re-create it (docs/reference.md#what-survives-what)",
			s.tenant.id, nc.Status.TenantID, restoreAdvice(nc))
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, knestv1.StateKeptReason
	}
	conditions.Set(nc, cond)
}

// restoreAdvice is the command that brings a blank tenant back, when a snapshot
// exists.
func restoreAdvice(nc *knestv1.NestedCluster) string {
	if s := nc.Status.Backup.LastSnapshot; s != nil {
		return fmt.Sprintf("restore its last snapshot (knest restore %s -n %s --from %s)", nc.Name, nc.Namespace, s.Name)
	}
	return "restore a snapshot of its etcd (none taken yet)"
}
