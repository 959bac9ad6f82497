//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	csicontroller "github.com/knest-dev/knest/pkg/csi/controller"
)

const volumeAppName = "volume"

// volumeApp is a claim of the tenant's default class and a one-pod Deployment that
// writes a token to it once, fsync'ed, and logs what it finds on every start.
type volumeApp struct {
	token string
	pvc   *corev1.PersistentVolumeClaim
	dep   *appsv1.Deployment
	first string // the node of its first pod
}

// expectVolumeKeepsData checks a tenant volume through what moves a pod: in a tenant
// whose default pool has `workers` nodes (one gets a second first), a claim of the
// tenant's default class binds and a pod writes a token; the pod moves to another
// worker (its node cordoned, the pod deleted) and reads the token back; that worker
// is removed with knest scale --remove-node (its node, Machine and VM gone), and the
// pod, rescheduled by its Deployment, reads it once more on another worker. Deleted,
// the claim leaves no host claim behind. A pool of one ends as it began, a larger one
// a node smaller.
func expectVolumeKeepsData(t *testing.T, key client.ObjectKey, tc tenant, workers int) {
	g := NewWithT(t)
	ctx := t.Context()
	step := "volume"
	app := startVolumeApp(t, key, tc, step)
	first := app.first

	scaleCtx, cancel := context.WithTimeout(ctx, scaleTimeout)
	defer cancel()
	if workers < 2 {
		start := time.Now()
		workers++
		_, err := knestCmd(t, scaleCtx, "scale", key.Name, "-n", key.Namespace, "--workers", strconv.Itoa(workers), "--timeout", scaleTimeout.String())
		g.Expect(err).NotTo(HaveOccurred(), "knest scale --workers %d", workers)
		s.timeline.add(step, fmt.Sprintf("a worker added (%d)", workers), time.Since(start))
	}
	start := time.Now()
	setUnschedulable(g, ctx, tc, first, true)
	deleteVolumePods(g, ctx, tc)
	second := expectVolumePod(t, tc, app.token, first, tenantTimeout)
	s.timeline.add(step, "pod moved to "+second+", token read back", time.Since(start))
	setUnschedulable(g, ctx, tc, first, false)

	// The worker that holds the volume scaled away: the drain moves the pod on.
	machine := machineOfNode(t, key, second)
	start = time.Now()
	_, err := knestCmd(t, scaleCtx, "scale", key.Name, "-n", key.Namespace, "--workers", strconv.Itoa(workers-1), "--remove-node", second, "--timeout", scaleTimeout.String())
	g.Expect(err).NotTo(HaveOccurred(), "knest scale --workers %d --remove-node %s", workers-1, second)
	third := expectVolumePod(t, tc, app.token, second, tenantTimeout)
	s.timeline.add(step, "worker "+second+" removed; pod on "+third+", token read back", time.Since(start))
	expectNodeRemoved(t, tc, key.Namespace, machine, second)
	s.timeline.add(step, "node, Machine and VM of "+second+" gone", time.Since(start))

	deleteVolumeApp(t, key, tc, app, step)
}

// expectVolumeReplugged checks a tenant volume on one worker: a claim of the
// tenant's default class binds and a pod writes a token; the Deployment scaled to
// zero, the volume is unplugged from the worker's VM (no VolumeAttachment, the host
// claim marked attached to no VM); scaled to one again, it is hot-plugged anew and
// the new pod reads the token back. Then the worker's VM restarts (its instance
// deleted, as virtctl restart does): the new instance starts although a volume was
// plugged into the old one, and the volume is plugged into it again, the pod's
// container reading the token back after the restart: the same node joins again
// from its fresh disk with the bootstrap token knest keeps valid. Deleted, the claim
// leaves no host claim behind.
func expectVolumeReplugged(t *testing.T, key client.ObjectKey, tc tenant) {
	g := NewWithT(t)
	ctx := t.Context()
	step := "volume"
	app := startVolumeApp(t, key, tc, step)

	start := time.Now()
	scaleDeployment(g, ctx, tc, app.dep, 0)
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(app.pvc), app.pvc)).To(Succeed())
		vas := &storagev1.VolumeAttachmentList{}
		g.Expect(tc.List(ctx, vas)).To(Succeed())
		for _, va := range vas.Items {
			g.Expect(va.Spec.Source.PersistentVolumeName).NotTo(HaveValue(Equal(app.pvc.Spec.VolumeName)), "VolumeAttachment %s", va.Name)
		}
		hostPVCs := &corev1.PersistentVolumeClaimList{}
		g.Expect(s.host.List(ctx, hostPVCs, client.InNamespace(key.Namespace), client.MatchingLabels{csicontroller.ClusterLabel: key.Name})).To(Succeed())
		g.Expect(hostPVCs.Items).To(HaveLen(1))
		g.Expect(hostPVCs.Items[0].Annotations).NotTo(HaveKey(csicontroller.AttachedToAnnotation), "host claim %s", hostPVCs.Items[0].Name)
	}, tenantTimeout, lbPoll).Should(Succeed(), "the volume unplugged")
	s.timeline.add(step, "scaled to 0: volume unplugged", time.Since(start))

	start = time.Now()
	scaleDeployment(g, ctx, tc, app.dep, 1)
	node := expectVolumePod(t, tc, app.token, "", tenantTimeout)
	s.timeline.add(step, "scaled to 1: volume plugged again, token read back on "+node, time.Since(start))

	start = time.Now()
	restartVM(t, key, node)
	s.timeline.add(step, "VM "+node+" restarted: a new instance Running", time.Since(start))
	expectVolumePodStartedSince(t, tc, app.token, start, createTimeout)
	s.timeline.add(step, "VM restarted: volume plugged into the new instance, token read back", time.Since(start))

	deleteVolumeApp(t, key, tc, app, step)
}

// restartVM deletes the instance of tenant node VM name, as virtctl restart does,
// and waits for KubeVirt to run a new one.
func restartVM(t *testing.T, key client.ObjectKey, name string) {
	g := NewWithT(t)
	ctx := t.Context()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, vmi)).To(Succeed())
	old := vmi.UID
	g.Expect(s.host.Delete(ctx, vmi)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(s.host.Get(ctx, client.ObjectKeyFromObject(vmi), vmi)).To(Succeed())
		g.Expect(vmi.UID).NotTo(Equal(old), "the old instance")
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, createTimeout, poll).Should(Succeed(), "a new instance of VM %s running", name)
}

// expectVolumePodStartedSince waits up to within for the volume app's one running
// pod to have a container started after since whose log shows the token.
func expectVolumePodStartedSince(t *testing.T, tc tenant, token string, since time.Time, within time.Duration) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		p := runningPod(g, t.Context(), tc, volumeAppName)
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		running := p.Status.ContainerStatuses[0].State.Running
		g.Expect(running).NotTo(BeNil(), "the container running")
		g.Expect(running.StartedAt.Time).To(BeTemporally(">", since), "the container started after the restart")
		logs, err := logsOf(t.Context(), tc, p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(logs).To(ContainSubstring("found "+token+" on "+p.Spec.NodeName), "the pod's log")
	}, within, lbPoll).Should(Succeed())
}

// expectVolumeOnAutoscaledNode checks a tenant volume and an autoscaled pool with one
// worker boot for both: a claim of the tenant's default class binds and a pod on the
// tenant's one worker writes a token; an autoscaled pool at zero is added; the worker
// cordoned and the pod deleted, the pod is pending until the autoscaler adds a node,
// where it reads the token back (the volume unplugged from one VM and plugged into
// the other); the worker uncordoned, the new node is unneeded and the autoscaler
// drains and removes it, the pod reads the token back on the worker, and the pool is
// at zero again. Deleted, the claim leaves no host claim behind.
func expectVolumeOnAutoscaledNode(t *testing.T, key client.ObjectKey, tc tenant) {
	g := NewWithT(t)
	ctx := t.Context()
	step := "volume on an autoscaled node"
	app := startVolumeApp(t, key, tc, step)
	addBurstPool(t, key, step)

	start := time.Now()
	setUnschedulable(g, ctx, tc, app.first, true)
	deleteVolumePods(g, ctx, tc)
	burst := expectVolumePod(t, tc, app.token, app.first, createTimeout)
	machine := expectBurstNode(t, key, tc, burst)
	s.timeline.add(step, "pod pending → a node added by the autoscaler; pod there, token read back", time.Since(start))

	start = time.Now()
	setUnschedulable(g, ctx, tc, app.first, false)
	back := expectVolumePod(t, tc, app.token, burst, tenantTimeout)
	s.timeline.add(step, "node unneeded → drained by the autoscaler; pod back on "+back+", token read back", time.Since(start))
	expectBurstPoolAtZero(t, key, tc, burst, machine)
	s.timeline.add(step, "pool at 0, node, machine, VM gone", time.Since(start))

	deleteVolumeApp(t, key, tc, app, step)
}

// startVolumeApp waits for the tenant's storage, creates the volume app and waits for
// its first pod to have written its token.
func startVolumeApp(t *testing.T, key client.ObjectKey, tc tenant, step string) *volumeApp {
	g := NewWithT(t)
	ctx := t.Context()
	nc := &knestv1.NestedCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
		g.Expect(conditions.IsTrue(nc, knestv1.StorageReadyCondition)).To(BeTrue(),
			"StorageReady: %s", conditions.GetMessage(nc, knestv1.StorageReadyCondition))
	}, tenantTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		sc := &storagev1.StorageClass{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Name: cluster.DefaultStorageClass}, sc)).To(Succeed())
		g.Expect(sc.Annotations).To(HaveKeyWithValue("storageclass.kubernetes.io/is-default-class", "true"))
	}, tenantTimeout, poll).Should(Succeed(), "the tenant's default StorageClass")

	token := utilrand.String(12)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	labels := map[string]string{"app": volumeAppName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: volumeAppName, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One pod at a time: the volume is ReadWriteOnce.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(1)),
					// Welcome on the autoscaled pool's nodes (expectVolumeOnAutoscaledNode).
					Tolerations: []corev1.Toleration{{Key: burstTaint.Key, Value: burstTaint.Value, Effect: burstTaint.Effect}},
					Containers: []corev1.Container{{
						Name: "app", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
						// Writes the token once, fsync'ed, then says what it finds on
						// every start.
						Command: []string{"/bin/busybox", "sh", "-c",
							"[ -f /data/token ] || { echo " + token + " > /data/token.tmp && /bin/busybox sync /data/token.tmp && /bin/busybox mv /data/token.tmp /data/token && /bin/busybox sync /data; }; " +
								"echo found $(cat /data/token) on $NODE; exec /bin/busybox sleep 100000"},
						Env:          []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
					}}},
				},
			},
		},
	}
	start := time.Now()
	for _, o := range []client.Object{pvc, dep} {
		g.Eventually(func() error {
			return client.IgnoreAlreadyExists(tc.Create(ctx, o.DeepCopyObject().(client.Object)))
		}, tenantTimeout, poll).Should(Succeed(), "creating %T", o)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
	}, tenantTimeout, lbPoll).Should(Succeed(), "the claim binds")
	s.timeline.add(step, "claim bound", time.Since(start))
	first := expectVolumePod(t, tc, token, "", tenantTimeout)
	s.timeline.add(step, "pod Running on "+first+", token written", time.Since(start))

	// A host claim of the tenant's, of the host's default class.
	hostPVCs := &corev1.PersistentVolumeClaimList{}
	g.Expect(s.host.List(ctx, hostPVCs, client.InNamespace(key.Namespace), client.MatchingLabels{csicontroller.ClusterLabel: key.Name})).To(Succeed())
	g.Expect(hostPVCs.Items).To(HaveLen(1))
	return &volumeApp{token: token, pvc: pvc, dep: dep, first: first}
}

// deleteVolumeApp deletes the app and its claim and expects the host claim gone.
func deleteVolumeApp(t *testing.T, key client.ObjectKey, tc tenant, app *volumeApp, step string) {
	g := NewWithT(t)
	ctx := t.Context()
	start := time.Now()
	g.Expect(tc.Delete(ctx, app.dep)).To(Succeed())
	g.Expect(tc.Delete(ctx, app.pvc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		hostPVCs := &corev1.PersistentVolumeClaimList{}
		g.Expect(s.host.List(ctx, hostPVCs, client.InNamespace(key.Namespace), client.MatchingLabels{csicontroller.ClusterLabel: key.Name})).To(Succeed())
		g.Expect(hostPVCs.Items).To(BeEmpty(), "host claims of the tenant's volumes")
	}, tenantTimeout, lbPoll).Should(Succeed())
	s.timeline.add(step, "claim deleted: no host claim left", time.Since(start))
}

// scaleDeployment sets dep's replicas.
func scaleDeployment(g Gomega, ctx context.Context, tc tenant, dep *appsv1.Deployment, replicas int32) {
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := tc.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(replicas)
		return tc.Update(ctx, d)
	}, tenantTimeout, poll).Should(Succeed(), "scale %s to %d", dep.Name, replicas)
}

// expectVolumePod waits up to within for the volume app's one running pod on a node
// other than notOn, and for its log to show the token; it returns the pod's node.
func expectVolumePod(t *testing.T, tc tenant, token, notOn string, within time.Duration) string {
	t.Helper()
	g := NewWithT(t)
	var node string
	g.Eventually(func(g Gomega) {
		p := runningPod(g, t.Context(), tc, volumeAppName)
		g.Expect(p.Spec.NodeName).NotTo(Equal(notOn))
		logs, err := logsOf(t.Context(), tc, p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(logs).To(ContainSubstring("found "+token+" on "+p.Spec.NodeName), "the pod's log")
		node = p.Spec.NodeName
	}, within, lbPoll).Should(Succeed())
	return node
}

func setUnschedulable(g Gomega, ctx context.Context, tc tenant, name string, v bool) {
	g.Eventually(func() error {
		n := &corev1.Node{}
		if err := tc.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		n.Spec.Unschedulable = v
		return tc.Update(ctx, n)
	}, tenantTimeout, poll).Should(Succeed(), "cordon %s: %v", name, v)
}

func deleteVolumePods(g Gomega, ctx context.Context, tc tenant) {
	g.Expect(tc.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.MatchingLabels{"app": volumeAppName})).To(Succeed())
}
