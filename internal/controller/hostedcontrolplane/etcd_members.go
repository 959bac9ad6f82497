package hostedcontrolplane

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// DefaultStrandedAfter is how long a member whose volume's host node it cannot run
// on (cordoned, not ready, gone) stays not ready before it is replaced: a node
// uncordoned after a short maintenance, or back after a reboot, keeps its member.
const DefaultStrandedAfter = 3 * time.Minute

// reconcileEtcdMembers reports etcd's members (EtcdMembersHealthy) and replaces one
// that is stranded: its data is on a volume bound to a host node it cannot run on,
// where the StatefulSet would wait for the node for ever. A hosted etcd's volumes
// are node-local on most hosts (local-path here), so every drain of a node strands
// the member on it. Replacing needs the other members' quorum and a cluster that
// was formed (EtcdJoin). Pods, volumes and nodes are read only while a member is
// not ready, uncached: a host's every pod is not worth a cache for this.
func (r *Reconciler) reconcileEtcdMembers(ctx context.Context, s *scope) (stepResult, error) {
	members := hosted.EtcdMembers(s.hcp)
	if s.in.EtcdStopped || s.in.EtcdStorageClass == nil {
		conditions.Delete(s.hcp, hcpv1.EtcdMembersHealthyCondition)
		return stepResult{}, nil
	}
	if int(s.etcd.Status.ReadyReplicas) >= members {
		setEtcdMembers(s.hcp, metav1.ConditionTrue, hcpv1.EtcdMembersReadyReason, fmt.Sprintf("%d of %d members ready", members, members))
		if members > 1 {
			if _, err := r.applier().Apply(ctx, s.hcp, s.in.EtcdJoin()); err != nil {
				return stepResult{}, err
			}
		}
		return r.spreadMembers(ctx, s, members)
	}
	if !initialized(s.hcp) {
		return stepResult{}, nil // forming: Available says what it waits for
	}
	ns, c := s.hcp.Namespace, s.cluster.Name
	pods := &corev1.PodList{}
	if err := r.reader().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(hosted.EtcdSelector(c))); err != nil {
		return stepResult{}, err
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	ready := 0
	var notReady []member
	for i := range members {
		m := member{index: i, pod: byName[hosted.EtcdMember(c, ns, i).Name]}
		if m.pod != nil && hosted.PodReady(m.pod) {
			ready++
			continue
		}
		if err := r.findStranding(ctx, ns, hosted.EtcdClaimName(c, i), &m); err != nil {
			return stepResult{}, err
		}
		notReady = append(notReady, m)
	}
	if len(notReady) == 0 {
		// Ready since the StatefulSet's status was read: the next status says so.
		return stepResult{}, nil
	}
	m := notReady[0]
	for _, n := range notReady {
		if n.node != "" {
			m = n
			break
		}
	}
	name := hosted.EtcdMember(c, ns, m.index).Name
	switch {
	case m.node == "":
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdMemberNotReadyReason,
			fmt.Sprintf("%d of %d members ready; %s is not", ready, members, name))
		return stepResult{}, nil
	case members == 1 || ready < members/2+1:
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdMemberStrandedReason,
			fmt.Sprintf("%s's volume is on host node %s, which %s; it cannot be replaced with %d of %d members ready: "+
				"bring the node back, or restore from a backup", name, m.node, m.why, ready, members))
		return stepResult{}, nil
	}
	if wait := r.strandedAfter() - time.Since(m.since); wait > 0 {
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdMemberNotReadyReason,
			fmt.Sprintf("%s's volume is on host node %s, which %s; replaced on another node if still so in %s",
				name, m.node, m.why, wait.Round(time.Second)))
		return stepResult{requeueAfter: wait}, nil
	}
	join := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hosted.EtcdJoinName(c)}, join); err != nil {
		if !apierrors.IsNotFound(err) {
			return stepResult{}, err
		}
		// Made once every member was ready: without it a new member would found a
		// cluster of its own.
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdMemberStrandedReason,
			fmt.Sprintf("%s's volume is on host node %s, which %s; etcd never had every member ready, so it cannot be replaced", name, m.node, m.why))
		return stepResult{}, nil
	}
	return r.replaceMember(ctx, s, m, fmt.Sprintf("%s's volume is on host node %s, which %s", name, m.node, m.why))
}

func (r *Reconciler) strandedAfter() time.Duration {
	if r.StrandedAfter == 0 {
		return DefaultStrandedAfter
	}
	return r.StrandedAfter
}

// member is an etcd member not ready; node is set when it is stranded there.
type member struct {
	index int
	pod   *corev1.Pod
	claim *corev1.PersistentVolumeClaim
	// node holds the member's volume and why says why it cannot run there.
	node, why string
	// since is when it was last ready, as far as its pod tells.
	since time.Time
}

// findStranding fills in m's claim, and its node and why when the claim's volume is
// bound to a host node that is gone, cordoned or not ready.
func (r *Reconciler) findStranding(ctx context.Context, ns, claim string, m *member) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName == "" || !pvc.DeletionTimestamp.IsZero() {
		return nil
	}
	m.claim = pvc
	nodeName, err := r.claimNode(ctx, pvc)
	if err != nil || nodeName == "" {
		return err // "": reachable from any node, the pod follows
	}
	if pvc.Annotations[hosted.EtcdMoveAnnotation] != "" {
		// Being moved (spreadMembers): its replacement goes on, at once.
		m.node, m.why = nodeName, "holds another member's volume too"
		return nil
	}
	node := &corev1.Node{}
	switch err := r.reader().Get(ctx, client.ObjectKey{Name: nodeName}, node); {
	case apierrors.IsNotFound(err):
		m.why = "is gone"
	case err != nil:
		return err
	case node.Spec.Unschedulable:
		m.why = "is cordoned"
	case !nodeReady(node):
		m.why = "is not ready"
	default:
		return nil
	}
	m.node = nodeName
	m.since = notReadySince(m.pod)
	return nil
}

// claimNode is the one host node that a bound claim's volume can be used on, ""
// for a volume reachable from any node.
func (r *Reconciler) claimNode(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (string, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return volumeNode(pv), nil
}

// replaceMember runs the replace Job for m and, once it succeeded, deletes m's
// claim and pod for the StatefulSet to make anew elsewhere.
func (r *Reconciler) replaceMember(ctx context.Context, s *scope, m member, why string) (stepResult, error) {
	ns, c := s.hcp.Namespace, s.cluster.Name
	name := hosted.EtcdMember(c, ns, m.index).Name
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hosted.EtcdReplaceJobName(c, m.index)}, job)
	switch {
	case apierrors.IsNotFound(err):
		job = s.in.EtcdReplaceJob(m.index, string(m.claim.UID), r.ToolImage)
		if err := controllerutil.SetControllerReference(s.hcp, job, r.Client.Scheme()); err != nil {
			return stepResult{}, err
		}
		if err := r.Client.Create(ctx, job); err != nil {
			return stepResult{}, fmt.Errorf("failed to create Job %s: %w", job.Name, err)
		}
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdReplacingMemberReason,
			fmt.Sprintf("%s: replacing it on another node (Job %s removes and adds the member)", why, job.Name))
		return stepResult{}, nil
	case err != nil:
		return stepResult{}, err
	case !job.DeletionTimestamp.IsZero():
		return stepResult{}, nil
	case job.Annotations[hosted.EtcdReplaceClaimAnnotation] != string(m.claim.UID):
		// Left from an earlier replacement of this member.
		return stepResult{}, r.deleteJob(ctx, job)
	case jobFailed(job) != nil:
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdReplacingMemberReason,
			fmt.Sprintf("%s: Job %s failed (%s), trying again", why, job.Name, jobFailed(job).Message))
		return stepResult{}, r.deleteJob(ctx, job)
	case !jobSucceeded(job):
		setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdReplacingMemberReason,
			fmt.Sprintf("%s: replacing it on another node (Job %s removes and adds the member)", why, job.Name))
		return stepResult{}, nil
	}
	// The member is out of etcd: its old data can no longer rejoin, so the pod may
	// go at once even from a node that does not answer.
	if err := r.Client.Delete(ctx, m.claim, client.Preconditions{UID: &m.claim.UID}); client.IgnoreNotFound(err) != nil {
		return stepResult{}, fmt.Errorf("failed to delete etcd volume %s: %w", m.claim.Name, err)
	}
	if m.pod != nil {
		if err := r.Client.Delete(ctx, m.pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &m.pod.UID}); client.IgnoreNotFound(err) != nil {
			return stepResult{}, fmt.Errorf("failed to delete etcd pod %s: %w", m.pod.Name, err)
		}
	}
	setEtcdMembers(s.hcp, metav1.ConditionFalse, hcpv1.EtcdReplacingMemberReason,
		fmt.Sprintf("%s: replaced in etcd; %s starts anew on another node and copies the others' data", why, name))
	return stepResult{}, r.deleteJob(ctx, job)
}

func (r *Reconciler) deleteJob(ctx context.Context, job *batchv1.Job) error {
	err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	return client.IgnoreNotFound(err)
}

// reader reads what the controller does not cache.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func setEtcdMembers(hcp *hcpv1.HostedControlPlane, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(hcp, metav1.Condition{Type: hcpv1.EtcdMembersHealthyCondition, Status: status, Reason: reason, Message: msg})
}

// volumeNode is the one host node a volume can be used on (a local volume's
// required node affinity on the hostname), or "".
func volumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, e := range terms[0].MatchExpressions {
		if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notReadySince is when the pod stopped being ready (or was made, never ready);
// now without a pod, which the StatefulSet is about to make.
func notReadySince(p *corev1.Pod) time.Time {
	if p == nil {
		return time.Now()
	}
	since := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since
}
