package hostedcontrolplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/hosted"
)

// etcdHost is a host of nodes and a control plane whose etcd members' pods and
// volumes the test puts in the states a drain or a lost node leaves.
type etcdHost struct {
	t *testing.T
	g Gomega
	s *scope
}

// newEtcdHost is an initialized control plane of members etcd members on volumes
// of a class, of which ready are ready by its StatefulSet's status.
func newEtcdHost(t *testing.T, g Gomega, name string, members int) *etcdHost {
	t.Helper()
	s := newTestScope(t, g, name, "10.95.0.10")
	s.hcp.Spec.Etcd.Members = int32(members)
	s.in.EtcdStorageClass = ptr.To("standard")
	s.hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	var err error
	s.etcd, _, err = s.in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	return &etcdHost{t: t, g: g, s: s}
}

// node makes a host node, ready or not, cordoned or not; its name is unique to the
// test's namespace (nodes are cluster-wide).
func (h *etcdHost) node(suffix string, ready, cordoned bool) string {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.s.hcp.Namespace + "-" + suffix}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	h.g.Expect(env.Client.Create(ctx, n)).To(Succeed())
	h.t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	h.g.Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
	if ready {
		// The API server's admission taints a new node not-ready; on a host the node
		// lifecycle controller, which the bed does not run, takes it off once ready.
		n.Spec.Taints = nil
		h.g.Expect(env.Client.Update(ctx, n)).To(Succeed())
	}
	return n.Name
}

// member makes member i's pod (ready or not; a pod not ready is Pending) and its
// claim, bound to a local volume on node; "" for no volume yet.
func (h *etcdHost) member(i int, ready bool, node string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	ctx := context.Background()
	ns, c := h.s.hcp.Namespace, h.s.cluster.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hosted.EtcdMember(c, ns, i).Name, Labels: hosted.EtcdSelector(c)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.6-0"}}},
	}
	h.g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	if ready {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		h.g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hosted.EtcdClaimName(c, i)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("standard"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if node != "" {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + pvc.Name},
			Spec: corev1.PersistentVolumeSpec{
				AccessModes: pvc.Spec.AccessModes, StorageClassName: "standard",
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/local-path/" + pvc.Name}},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: pvc.Name},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
		h.g.Expect(env.Client.Create(ctx, pv)).To(Succeed())
		h.t.Cleanup(func() { _ = env.Client.Delete(ctx, pv) })
		pvc.Spec.VolumeName = pv.Name
	}
	h.g.Expect(env.Client.Create(ctx, pvc)).To(Succeed())
	return pod, pvc
}

// step runs the step with etcd's StatefulSet reporting ready members.
func (h *etcdHost) step(r *Reconciler, ready int32) stepResult {
	h.s.etcd.Status.ReadyReplicas = ready
	res, err := r.reconcileEtcdMembers(context.Background(), h.s)
	h.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (h *etcdHost) condition() *metav1.Condition {
	return conditions.Get(h.s.hcp, hcpv1.EtcdMembersHealthyCondition)
}

func (h *etcdHost) replaceJob(i int) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: h.s.hcp.Namespace, Name: hosted.EtcdReplaceJobName(h.s.cluster.Name, i)}, job)
	return job, err
}

// A drained host node leaves its member Pending on a volume bound to that node:
// after StrandedAfter, and only with the others' quorum and a cluster that was
// formed, the member is removed and added again by a Job, and then its claim and
// pod go, for the StatefulSet to make on another node.
func TestStrandedEtcdMemberIsReplacedOnAnotherNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newEtcdHost(t, g, "strand", 3)
	a, b, drained := h.node("a", true, false), h.node("b", true, false), h.node("c", true, true)
	h.member(0, true, a)
	h.member(1, true, b)
	pod, pvc := h.member(2, false, drained)
	r := &Reconciler{Client: env.Client, ToolImage: "docker.io/knest/knest:test"}

	// Never formed: nothing to join, so nothing is replaced.
	h.step(r, 2)
	g.Expect(h.condition().Reason).To(Equal(hcpv1.EtcdMemberNotReadyReason), "not stranded long enough yet")
	r.StrandedAfter = time.Millisecond
	h.step(r, 2)
	g.Expect(h.condition().Reason).To(Equal(hcpv1.EtcdMemberStrandedReason))
	g.Expect(h.condition().Message).To(ContainSubstring("never had every member ready"))
	_, err := h.replaceJob(2)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	// Every member ready once: the join ConfigMap exists from then on.
	h.step(r, 3)
	g.Expect(h.condition().Status).To(Equal(metav1.ConditionTrue))
	join := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: pvc.Namespace, Name: hosted.EtcdJoinName("strand")}, join)).To(Succeed())
	g.Expect(join.Data).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "existing"))
	g.Expect(join.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "strand"), "the controller's ConfigMap cache selects it")

	// Not yet stranded long enough: it waits, and says when it looks again.
	r.StrandedAfter = time.Hour
	res := h.step(r, 2)
	g.Expect(res.requeueAfter).To(BeNumerically("~", time.Hour, time.Minute))
	g.Expect(h.condition().Message).To(ContainSubstring("volume is on host node " + drained + ", which is cordoned"))
	_, err = h.replaceJob(2)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	r.StrandedAfter = time.Millisecond
	h.step(r, 2)
	g.Expect(h.condition().Reason).To(Equal(hcpv1.EtcdReplacingMemberReason))
	job, err := h.replaceJob(2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Annotations).To(HaveKeyWithValue(hosted.EtcdReplaceClaimAnnotation, string(pvc.UID)))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--peer-url=" + hosted.EtcdMember("strand", pvc.Namespace, 2).PeerURL))

	// While the Job runs, the member's volume and pod stay.
	h.step(r, 2)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})).To(Succeed())

	// A failed Job is made anew.
	g.Expect(testenv.EndJob(ctx, env.Client, job, true)).To(Succeed())
	h.step(r, 2)
	g.Expect(h.condition().Message).To(ContainSubstring("failed"))
	g.Eventually(func() bool { _, err := h.replaceJob(2); return apierrors.IsNotFound(err) }, "30s").Should(BeTrue())
	h.step(r, 2)
	job, err = h.replaceJob(2)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(testenv.EndJob(ctx, env.Client, job, false)).To(Succeed())
	h.step(r, 2)
	g.Expect(h.condition().Message).To(ContainSubstring("starts anew on another node"))
	gone := func(obj client.Object) func() bool {
		return func() bool {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err) || (err == nil && !obj.GetDeletionTimestamp().IsZero())
		}
	}
	g.Eventually(gone(&corev1.PersistentVolumeClaim{ObjectMeta: pvc.ObjectMeta}), "30s").Should(BeTrue())
	g.Eventually(gone(&corev1.Pod{ObjectMeta: pod.ObjectMeta}), "30s").Should(BeTrue())
	g.Eventually(gone(&batchv1.Job{ObjectMeta: job.ObjectMeta}), "30s").Should(BeTrue())
}

// What cannot be replaced is said, and left alone: a member whose others hold no
// quorum, or a member alone. A member not ready on a node it can run on is only
// reported.
func TestStrandedEtcdMemberWithoutQuorumIsLeft(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{Client: env.Client, ToolImage: "docker.io/knest/knest:test", StrandedAfter: time.Millisecond}

	h := newEtcdHost(t, g, "noquorum", 3)
	gone := h.s.hcp.Namespace + "-lost" // no such node any more
	h.member(0, true, h.node("a", true, false))
	h.member(1, false, h.node("b", false, false))
	h.member(2, false, gone)
	h.step(r, 3) // formed once
	h.step(r, 1)
	g.Expect(h.condition().Reason).To(Equal(hcpv1.EtcdMemberStrandedReason))
	g.Expect(h.condition().Message).To(SatisfyAny(ContainSubstring("which is not ready"), ContainSubstring("which is gone")))
	g.Expect(h.condition().Message).To(ContainSubstring("1 of 3 members ready"))
	for i := range 3 {
		_, err := h.replaceJob(i)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}

	one := newEtcdHost(t, g, "alone", 1)
	one.member(0, false, one.node("a", true, true))
	one.step(r, 0)
	g.Expect(one.condition().Reason).To(Equal(hcpv1.EtcdMemberStrandedReason))
	g.Expect(one.condition().Message).To(ContainSubstring("restore from a backup"))

	starting := newEtcdHost(t, g, "starting", 3)
	starting.member(0, true, starting.node("a", true, false))
	starting.member(1, true, starting.node("b", true, false))
	starting.member(2, false, starting.node("c", true, false))
	starting.step(r, 3)
	starting.step(r, 2)
	g.Expect(starting.condition().Reason).To(Equal(hcpv1.EtcdMemberNotReadyReason))
	_, err := starting.replaceJob(2)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// A drain leaves two members' volumes on one host node. With every member ready and
// a ready, schedulable node that holds none, the last of the two is moved there the
// way a stranded member is replaced, carried on while its Job makes it not ready;
// and the next move waits moveEvery × StrandedAfter.
func TestCrowdedEtcdMembersAreSpread(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := &Reconciler{Client: env.Client, ToolImage: "docker.io/knest/knest:test", StrandedAfter: time.Hour}
	h := newEtcdHost(t, g, "crowd", 3)
	a, b := h.node("a", true, false), h.node("b", true, false)
	h.member(0, true, a)
	h.member(1, true, b)
	pod, pvc := h.member(2, true, a)
	h.node("cordoned", true, true)
	h.node("down", false, false)

	// No node to move to: looked at again later.
	res := h.step(r, 3)
	g.Expect(h.condition().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(res.requeueAfter).To(Equal(time.Hour))
	_, err := h.replaceJob(2)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	free := h.node("c", true, false)
	h.step(r, 3)
	g.Expect(h.condition().Reason).To(Equal(hcpv1.EtcdReplacingMemberReason))
	g.Expect(h.condition().Message).To(ContainSubstring("on host node " + a + ", which holds another member's volume too, and host node " + free + " holds none"))
	job, err := h.replaceJob(2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Annotations).To(HaveKeyWithValue(hosted.EtcdReplaceClaimAnnotation, string(pvc.UID)))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
	g.Expect(pvc.Annotations).To(HaveKey(hosted.EtcdMoveAnnotation))
	g.Expect(h.s.hcp.Annotations).To(HaveKey(hosted.EtcdMovedAtAnnotation))

	// The Job removed the member, whose pod is no longer ready: though its node is
	// ready and schedulable, and StrandedAfter has not passed, it is replaced.
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	g.Expect(testenv.EndJob(ctx, env.Client, job, false)).To(Succeed())
	h.step(r, 2)
	g.Expect(h.condition().Message).To(ContainSubstring("starts anew on another node"))
	for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{ObjectMeta: pvc.ObjectMeta}, &corev1.Pod{ObjectMeta: pod.ObjectMeta}} {
		g.Eventually(func() bool {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err) || err == nil && !obj.GetDeletionTimestamp().IsZero()
		}, "30s").Should(BeTrue(), "%T %s deleted", obj, obj.GetName())
	}

	// Crowded again soon after (the scheduler put it back, the spread being only
	// preferred): not moved again before moveEvery × StrandedAfter.
	again := newEtcdHost(t, g, "crowd-again", 3)
	x := again.node("x", true, false)
	again.member(0, true, x)
	again.member(1, true, x)
	again.member(2, true, again.node("y", true, false))
	again.s.hcp.Annotations = map[string]string{hosted.EtcdMovedAtAnnotation: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	res = again.step(r, 3)
	g.Expect(res.requeueAfter).To(BeNumerically("~", (moveEvery-1)*time.Hour, time.Minute))
	g.Expect(again.condition().Status).To(Equal(metav1.ConditionTrue))
	for i := range 3 {
		_, err := again.replaceJob(i)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
}

// A move waits while a drain is under way, though the StatefulSet's status, read
// before, still counts every member ready: a member's node cordoned, or a member's
// pod no longer ready (evicted). Begun then, the move would take a second member
// out of etcd and leave one of three.
func TestEtcdMembersAreNotMovedDuringADrain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := &Reconciler{Client: env.Client, ToolImage: "docker.io/knest/knest:test", StrandedAfter: time.Hour}
	h := newEtcdHost(t, g, "drain-race", 3)
	a := h.node("a", true, false)
	draining := h.node("b", true, true)
	h.member(0, true, a)
	evicted, _ := h.member(1, true, draining)
	h.member(2, true, a)
	h.node("c", true, false)
	noMove := func(why string) {
		t.Helper()
		res := h.step(r, 3)
		g.Expect(res.requeueAfter).To(Equal(time.Hour), why)
		_, err := h.replaceJob(2)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), why)
	}
	noMove("member 1's node is cordoned")

	node := &corev1.Node{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: draining}, node)).To(Succeed())
	node.Spec.Unschedulable = false
	g.Expect(env.Client.Update(ctx, node)).To(Succeed())
	evicted.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctx, evicted)).To(Succeed())
	noMove("member 1's pod is not ready")

	evicted.Status.Conditions[0].Status = corev1.ConditionTrue
	g.Expect(env.Client.Status().Update(ctx, evicted)).To(Succeed())
	h.step(r, 3)
	_, err := h.replaceJob(2)
	g.Expect(err).NotTo(HaveOccurred(), "moved once nothing is under way")
}
