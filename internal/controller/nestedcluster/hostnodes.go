package nestedcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// What the tenant's VMs say of the host nodes they run on: whether VMs of one pool
// share a node (condition HostSpread), whether KubeVirt could live-migrate them
// (condition LiveMigratable), whether their nodes are ready (condition
// HostNodesReady), and which no node can take (in WorkersReady and
// ControlPlaneReady). Read from the VMIs, which carry the labels of the VM template
// knest renders (pkg/vmtemplate), and from those VMIs' host nodes.

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// observeVMs reads the tenant's VMIs and the host nodes they are on. Nodes are read
// uncached: the controller watches none, and a tenant's VMs are on a few.
func (r *Reconciler) observeVMs(ctx context.Context, s *scope) error {
	list := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.nc.Namespace), client.MatchingLabels{knestv1.ClusterNameLabel: s.nc.Name}); err != nil {
		return fmt.Errorf("failed to list the VirtualMachineInstances: %w", err)
	}
	s.vms = list.Items
	s.hostNodes = map[string]string{}
	for _, vm := range s.vms {
		name := vm.Status.NodeName
		if _, seen := s.hostNodes[name]; seen || name == "" {
			continue
		}
		node := &corev1.Node{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, node); {
		case apierrors.IsNotFound(err):
			s.hostNodes[name] = "is gone"
		case err != nil:
			return fmt.Errorf("failed to read host node %s: %w", name, err)
		default:
			s.hostNodes[name] = hostNodeNotReady(node)
		}
	}
	return nil
}

// hostNodeNotReady says why node is not ready, "" when it is.
func hostNodeNotReady(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		return fmt.Sprintf("is not ready (Ready %s since %s)", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	return "is not ready (it has not reported)"
}

// vmsOfNestedCluster maps a VMI to its NestedCluster, which lives in its namespace.
var vmsOfNestedCluster = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[knestv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
})

// vmPlacementChanged lets through only the VMI updates the conditions read: a
// VMI's status changes often (guest agent, interfaces) without any of these.
var vmPlacementChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*kubevirtv1.VirtualMachineInstance)
	n, ok2 := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
	if !ok1 || !ok2 {
		return true
	}
	return o.Status.Phase != n.Status.Phase || o.Status.NodeName != n.Status.NodeName ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		migratableState(o) != migratableState(n) || vmReady(o) != vmReady(n) ||
		unschedulableMessage(o) != unschedulableMessage(n)
}}

// vmReady is KubeVirt's Ready condition of a VMI, which falls when its host node
// stops answering: a reconcile then reads the node.
func vmReady(vm *kubevirtv1.VirtualMachineInstance) corev1.ConditionStatus {
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status
		}
	}
	return ""
}

// migratableState is what the conditions read of KubeVirt's LiveMigratable.
func migratableState(vm *kubevirtv1.VirtualMachineInstance) string {
	if c := migratable(vm); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

// unschedulableMessage is the host scheduler's word on a VMI it cannot place
// (KubeVirt copies the launcher pod's PodScheduled condition), "" otherwise.
func unschedulableMessage(vm *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled) &&
			c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// unschedulable names the VMs of pool (a pool's name, or knestv1.ControlPlanePool)
// that no host node can take, and why, or returns "". Without it a pool waits in
// silence: a 2-core host held a VM control plane and one of two workers of 2 vCPUs,
// and the second worker's VM waited for CPU requests the host never had.
func unschedulable(vms []kubevirtv1.VirtualMachineInstance, pool string) string {
	var names []string
	var why string
	for i := range vms {
		vm := &vms[i]
		msg := unschedulableMessage(vm)
		if vm.Labels[knestv1.PoolNameLabel] != pool || !vm.DeletionTimestamp.IsZero() || msg == "" {
			continue
		}
		names = append(names, vm.Name)
		if why == "" {
			why = msg
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf("no host node can take VM %s: %s", strings.Join(names, ", "), strings.TrimSpace(why))
}

// running are the VMIs that run on a host node and are not going away.
func running(vms []kubevirtv1.VirtualMachineInstance) []kubevirtv1.VirtualMachineInstance {
	var out []kubevirtv1.VirtualMachineInstance
	for _, vm := range vms {
		if vm.Status.Phase == kubevirtv1.Running && vm.Status.NodeName != "" && vm.DeletionTimestamp.IsZero() {
			out = append(out, vm)
		}
	}
	return out
}

func poolOf(vm *kubevirtv1.VirtualMachineInstance) string {
	if p := vm.Labels[knestv1.PoolNameLabel]; p != knestv1.ControlPlanePool {
		return "pool " + p
	}
	return "control plane"
}

// setHostSpreadCondition says whether VMs of one pool share a host node.
func setHostSpreadCondition(nc *knestv1.NestedCluster, vms []kubevirtv1.VirtualMachineInstance) {
	vms = running(vms)
	if len(vms) == 0 {
		conditions.Delete(nc, knestv1.HostSpreadCondition)
		return
	}
	type place struct{ pool, node string }
	together := map[place][]string{}
	for i := range vms {
		p := place{poolOf(&vms[i]), vms[i].Status.NodeName}
		together[p] = append(together[p], vms[i].Name)
	}
	var shared []string
	for p, names := range together {
		if len(names) > 1 {
			slices.Sort(names)
			shared = append(shared, fmt.Sprintf("%s: %s on host node %s", p.pool, strings.Join(names, ", "), p.node))
		}
	}
	cond := metav1.Condition{Type: knestv1.HostSpreadCondition, Status: metav1.ConditionTrue, Reason: knestv1.SpreadReason,
		Message: "Each pool's VMs run on distinct host nodes"}
	if len(shared) > 0 {
		slices.Sort(shared)
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.SharedHostNodeReason
		cond.Message = "VMs of one pool share a host node, whose drain or loss takes them together (knest prefers distinct nodes; the scheduler found none other that fit, or scored it lower): " +
			strings.Join(shared, "; ")
	}
	conditions.Set(nc, cond)
}

// migratable is KubeVirt's LiveMigratable condition of a VMI; nil until virt-handler
// has set it.
func migratable(vm *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstanceCondition {
	for i, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
			return &vm.Status.Conditions[i]
		}
	}
	return nil
}

// setLiveMigratableCondition says, per pool, whether KubeVirt could live-migrate
// its VMs, and why not.
func setLiveMigratableCondition(nc *knestv1.NestedCluster, vms []kubevirtv1.VirtualMachineInstance) {
	type pool struct {
		name        string
		vms, cannot int
		firstWhyNot string
	}
	var pools []*pool
	for _, vm := range running(vms) {
		c := migratable(&vm)
		if c == nil {
			continue
		}
		name := poolOf(&vm)
		i := slices.IndexFunc(pools, func(p *pool) bool { return p.name == name })
		if i < 0 {
			i = len(pools)
			pools = append(pools, &pool{name: name})
		}
		p := pools[i]
		p.vms++
		if c.Status != corev1.ConditionTrue {
			p.cannot++
			if p.firstWhyNot == "" {
				p.firstWhyNot = strings.TrimSuffix(fmt.Sprintf("%s: %s", c.Reason, c.Message), ": ")
			}
		}
	}
	if len(pools) == 0 {
		conditions.Delete(nc, knestv1.LiveMigratableCondition)
		return
	}
	slices.SortFunc(pools, func(a, b *pool) int { return strings.Compare(a.name, b.name) })
	var cannot []string
	for _, p := range pools {
		if p.cannot > 0 {
			cannot = append(cannot, fmt.Sprintf("%s: %d of %d VMs (%s)", p.name, p.cannot, p.vms, p.firstWhyNot))
		}
	}
	cond := metav1.Condition{Type: knestv1.LiveMigratableCondition, Status: metav1.ConditionTrue, Reason: knestv1.LiveMigratableReason,
		Message: "KubeVirt can live-migrate every VM. A host drain still has CAPK drain each tenant node and KubeVirt restart its VM on another host node (evictionStrategy External)"}
	if len(cannot) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.NotLiveMigratableReason
		cond.Message = "KubeVirt cannot live-migrate " + strings.Join(cannot, "; ") +
			". A host drain has CAPK drain each such tenant node, then KubeVirt restarts its VM on another host node"
	}
	conditions.Set(nc, cond)
}

// setHostNodesReadyCondition names the tenant's VMs whose host node is not ready or
// gone: lost until the node is back or declared gone (docs/design/host-maintenance.md).
func setHostNodesReadyCondition(nc *knestv1.NestedCluster, vms []kubevirtv1.VirtualMachineInstance, nodes map[string]string) {
	var lost []string
	on := 0
	for i := range vms {
		vm := &vms[i]
		if vm.Status.NodeName == "" {
			continue
		}
		on++
		if why := nodes[vm.Status.NodeName]; why != "" {
			lost = append(lost, fmt.Sprintf("%s (%s) on host node %s, which %s", vm.Name, poolOf(vm), vm.Status.NodeName, why))
		}
	}
	if on == 0 {
		conditions.Delete(nc, knestv1.HostNodesReadyCondition)
		return
	}
	cond := metav1.Condition{Type: knestv1.HostNodesReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.HostNodesReadyReason,
		Message: "Every host node running a VM of the tenant is ready"}
	if len(lost) > 0 {
		slices.Sort(lost)
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.HostNodeNotReadyReason
		cond.Message = strings.Join(lost, "; ") + ". KubeVirt restarts such a VM on another node only once its node is back, " +
			"or declared gone: delete the Node object or taint it node.kubernetes.io/out-of-service (docs/design/host-maintenance.md#a-node-lost); " +
			"the tenant node's health check replaces its Machine meanwhile"
	}
	conditions.Set(nc, cond)
}
