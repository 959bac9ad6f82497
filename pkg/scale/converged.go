package scale

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Converged reports whether nc's status has reached its spec: the controller observed
// the current generation, the control plane and every pool have as many nodes ready
// as the spec asks for, and the Ready condition is True.
func Converged(nc *knestv1.NestedCluster) bool {
	return len(Pending(nc)) == 0
}

// Pending lists, in words, what keeps nc from having converged; empty when it has.
func Pending(nc *knestv1.NestedCluster) []string {
	var out []string
	st := nc.Status
	if st.ObservedGeneration < nc.Generation {
		out = append(out, fmt.Sprintf("the controller has not yet observed generation %d (observed %d)", nc.Generation, st.ObservedGeneration))
	}
	if want := nc.Spec.ControlPlane.Replicas; st.ControlPlane.Desired != want || st.ControlPlane.Ready != want {
		out = append(out, fmt.Sprintf("control plane %d/%d ready", st.ControlPlane.Ready, want))
	} else if st.ControlPlane.Current > want {
		out = append(out, fmt.Sprintf("control plane: %d of %d machines still being removed", st.ControlPlane.Current-want, st.ControlPlane.Current))
	}
	for i := range nc.Spec.Workers {
		p := &nc.Spec.Workers[i]
		want, known := PoolWant(nc, *p)
		got, ok := PoolStatus(nc, p.Name)
		if !known {
			out = append(out, fmt.Sprintf("pool %s: the controller has not yet reported the size the autoscaler set", p.Name))
			continue
		}
		if !ok && want == 0 {
			continue
		}
		if got.Desired != want || got.Ready != want {
			out = append(out, fmt.Sprintf("pool %s %d/%d ready", p.Name, got.Ready, want))
		} else if got.Current > want {
			// A machine being drained and deleted is no longer Ready: the pool has
			// its size only once it is gone.
			out = append(out, fmt.Sprintf("pool %s: %d of %d machines still being removed", p.Name, got.Current-want, got.Current))
		}
	}
	if !meta.IsStatusConditionTrue(st.Conditions, knestv1.ReadyCondition) {
		out = append(out, "condition Ready is not True")
	}
	return out
}

// PoolWant is how many nodes pool p should have: its spec's replicas (unset: 1), or,
// for an autoscaled pool, what the autoscaler set, as the controller reports it
// (status.workers[].desired); known is false while the controller has not reported
// the pool as autoscaled yet.
func PoolWant(nc *knestv1.NestedCluster, p knestv1.WorkerPool) (want int32, known bool) {
	if p.Autoscaling == nil {
		return p.ReplicasOrDefault(), true
	}
	for _, ps := range nc.Status.Workers {
		if ps.Name == p.Name && ps.Autoscaling != nil {
			return ps.Desired, true
		}
	}
	return 0, false
}

// PoolStatus returns the status of the named pool.
func PoolStatus(nc *knestv1.NestedCluster, pool string) (knestv1.ReplicaStatus, bool) {
	for _, p := range nc.Status.Workers {
		if p.Name == pool {
			return p.ReplicaStatus, true
		}
	}
	return knestv1.ReplicaStatus{}, false
}

// Blocking returns the condition that best explains why nc is not ready: the first
// that is not True in the order the controller's Ready summary picks its cause (the
// graph applied, the infrastructure, the control plane, the workers), then any other
// condition that is not True, then Ready itself. It returns nil when every condition
// is True.
func Blocking(nc *knestv1.NestedCluster) *metav1.Condition {
	conds := nc.Status.Conditions
	for _, t := range []string{knestv1.TopologyReconciledCondition, knestv1.InfrastructureReadyCondition,
		knestv1.ControlPlaneReadyCondition, knestv1.WorkersReadyCondition} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status != metav1.ConditionTrue {
			return c
		}
	}
	var ready *metav1.Condition
	for i := range conds {
		c := &conds[i]
		if c.Status == metav1.ConditionTrue {
			continue
		}
		if c.Type == knestv1.ReadyCondition {
			ready = c
			continue
		}
		return c
	}
	return ready
}
