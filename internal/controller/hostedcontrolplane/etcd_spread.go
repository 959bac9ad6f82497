package hostedcontrolplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/hosted"
)

// moveEvery is how many StrandedAfter apart two moves of members for their spread
// begin at the least: a member that the scheduler puts back on the node it left
// (the spread is only preferred) is not moved again and again.
const moveEvery = 10

// spreadMembers moves a member, with every member ready, off a host node that holds
// another member's volume too, when a ready, schedulable node holds none. A drain or
// a lost node leaves two members on one node (their replacement goes where the
// scheduler finds room), and nothing moves them back when the node returns: losing
// that one node would then lose etcd's quorum. The move is the stranded member's
// replacement (the replace Job, then a new claim and pod), and needs three members
// or more, so that the others keep a quorum meanwhile. Only node-local volumes are
// seen (a volume reachable from any node does not tie a member to a node).
func (r *Reconciler) spreadMembers(ctx context.Context, s *scope, members int) (stepResult, error) {
	if members < 3 {
		return stepResult{}, nil
	}
	ns, c := s.hcp.Namespace, s.cluster.Name
	claims := make([]*corev1.PersistentVolumeClaim, members)
	for i := range members {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hosted.EtcdClaimName(c, i)}, pvc); err != nil {
			return stepResult{}, client.IgnoreNotFound(err)
		}
		if pvc.Spec.VolumeName == "" || !pvc.DeletionTimestamp.IsZero() {
			return stepResult{}, nil
		}
		claims[i] = pvc
	}
	byNode := map[string][]int{}
	for i, pvc := range claims {
		node, err := r.claimNode(ctx, pvc)
		if err != nil || node == "" {
			return stepResult{}, err
		}
		if pvc.Annotations[hosted.EtcdMoveAnnotation] != "" {
			// Decided before its Job made the member not ready: carried on.
			return r.move(ctx, s, i, pvc, node, "which holds another member's volume too")
		}
		byNode[node] = append(byNode[node], i)
	}
	var crowded string
	for node, held := range byNode {
		if len(held) > 1 && (crowded == "" || node < crowded) {
			crowded = node
		}
	}
	if crowded == "" {
		return stepResult{}, nil
	}
	if last, err := time.Parse(time.RFC3339, s.hcp.Annotations[hosted.EtcdMovedAtAnnotation]); err == nil {
		if wait := time.Duration(moveEvery)*r.strandedAfter() - time.Since(last); wait > 0 {
			return stepResult{requeueAfter: wait}, nil
		}
	}
	free, err := r.freeNode(ctx, byNode)
	if err != nil {
		return stepResult{}, err
	}
	if free == "" {
		// No watch tells of a node uncordoned or added: look again later.
		return stepResult{requeueAfter: r.strandedAfter()}, nil
	}
	if busy, err := r.membersBusy(ctx, s, members, byNode); busy || err != nil {
		return stepResult{requeueAfter: r.strandedAfter()}, err
	}
	i := slices.Max(byNode[crowded])
	pvc := claims[i]
	now := time.Now().UTC().Format(time.RFC3339)
	base := pvc.DeepCopy()
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[hosted.EtcdMoveAnnotation] = now
	if err := r.Client.Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return stepResult{}, fmt.Errorf("failed to mark etcd volume %s for a move: %w", pvc.Name, err)
	}
	if s.hcp.Annotations == nil {
		s.hcp.Annotations = map[string]string{}
	}
	s.hcp.Annotations[hosted.EtcdMovedAtAnnotation] = now
	return r.move(ctx, s, i, pvc, crowded, "which holds another member's volume too, and host node "+free+" holds none")
}

// move replaces member i, whose claim pvc has its volume on node, for why.
func (r *Reconciler) move(ctx context.Context, s *scope, i int, pvc *corev1.PersistentVolumeClaim, node, why string) (stepResult, error) {
	name := hosted.EtcdMember(s.cluster.Name, s.hcp.Namespace, i).Name
	m := member{index: i, claim: pvc, node: node, pod: &corev1.Pod{}}
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: s.hcp.Namespace, Name: name}, m.pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return stepResult{}, err
		}
		m.pod = nil
	}
	return r.replaceMember(ctx, s, m, fmt.Sprintf("%s's volume is on host node %s, %s", name, node, why))
}

// freeNode is a host node that holds no member's volume (byNode) and that a member
// can be scheduled on: ready, not cordoned, without taints that keep pods off; ""
// when there is none. Of several, the first by name.
func (r *Reconciler) freeNode(ctx context.Context, byNode map[string][]int) (string, error) {
	nodes := &corev1.NodeList{}
	if err := r.reader().List(ctx, nodes); err != nil {
		return "", err
	}
	var free []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, holds := byNode[n.Name]; holds || n.Spec.Unschedulable || !nodeReady(n) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule }) {
			continue
		}
		free = append(free, n.Name)
	}
	if len(free) == 0 {
		return "", nil
	}
	return slices.Min(free), nil
}

// membersBusy tells whether a move must wait: a member's pod, read now rather than
// from the StatefulSet's status, is not ready or is going (a drain evicting it), or
// a node holding a member's volume is cordoned or not ready (a drain under way). A
// move takes its member out of etcd; begun while a drain takes another, it would
// leave one of three (seen on the 3-node kind host: the move began two seconds
// after a drain of the next node evicted a member).
func (r *Reconciler) membersBusy(ctx context.Context, s *scope, members int, byNode map[string][]int) (bool, error) {
	for i := range members {
		pod := &corev1.Pod{}
		key := client.ObjectKey{Namespace: s.hcp.Namespace, Name: hosted.EtcdMember(s.cluster.Name, s.hcp.Namespace, i).Name}
		if err := r.reader().Get(ctx, key, pod); err != nil {
			return true, client.IgnoreNotFound(err)
		}
		if !hosted.PodReady(pod) {
			return true, nil
		}
	}
	for name := range byNode {
		node := &corev1.Node{}
		if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return true, client.IgnoreNotFound(err)
		}
		if node.Spec.Unschedulable || !nodeReady(node) {
			return true, nil
		}
	}
	return false, nil
}
