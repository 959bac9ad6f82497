//go:build e2e

package tenant_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cluster"
	csicontroller "github.com/knest-dev/knest/pkg/csi/controller"
)

const writerApp = "writer"

// The writer's script: on start it says how many records of the file are whole and
// in order ("intact through N"), then appends numbered records, each fsync'ed before
// it says so ("synced N").
const writerScript = `n=0
if [ -f /data/log ]; then
  while read -r w v; do [ "$w" = seq ] && [ "$v" = "$((n+1))" ] || break; n=$v; done < /data/log
fi
echo "intact through $n on $NODE"
i=$n
while true; do
  i=$((i+1)); echo "seq $i" >> /data/log; /bin/busybox sync /data/log; echo "synced $i"
  /bin/busybox sleep 0.2
done`

var (
	syncedRE = regexp.MustCompile(`synced (\d+)`)
	intactRE = regexp.MustCompile(`intact through (\d+) on (\S+)`)
)

// TestVolumeWorkerKilled (make e2e-faults) kills the worker VM whose pod writes to a
// volume: the pod must come back on the other worker with every record it had
// fsync'ed before the kill, and the tenant must be whole again (the killed worker
// back as the same node) with nothing left on the host after its delete.
func TestVolumeWorkerKilled(t *testing.T) {
	key := client.ObjectKey{Namespace: newNamespace(t), Name: "volume-kill"}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(key)
		}
	})
	const step = "volume worker killed"
	ok := t.Run("create a hosted tenant with two workers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
		defer cancel()
		start := time.Now()
		_, err := createCluster(t, ctx, key, append(slices.Clone(hostedFlags), "--workers", "2"), "--timeout", createTimeout.String())
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "knest create")
		s.timeline.add("create "+key.Name, "knest create returned (Ready)", time.Since(start))
		expectNodesReady(t, tenantClient(t, key), 2)
	})
	if !ok {
		return
	}

	t.Run("the writer's worker VM killed: the pod back on the other worker with every fsync'ed record", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
		defer cancel()
		tc := tenantClient(t, key)
		pvc, dep := writer()
		for _, o := range []client.Object{pvc, dep} {
			g.Expect(tc.Create(ctx, o)).To(Succeed(), "creating %T", o)
		}
		victim, before := "", 0
		g.Eventually(func(g Gomega) {
			p := runningPod(g, ctx, tc, writerApp)
			logs, err := logsOf(ctx, tc, p)
			g.Expect(err).NotTo(HaveOccurred())
			before = lastMatch(syncedRE, logs)
			g.Expect(before).To(BeNumerically(">=", 20), "records synced by %s", p.Name)
			victim = p.Spec.NodeName
		}, tenantTimeout, lbPoll).Should(Succeed(), "the writer runs and syncs")

		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: victim}, vmi)).To(Succeed())
		// Read again just before the kill: every record said synced by now must survive.
		logs, err := logsOf(ctx, tc, runningPod(g, ctx, tc, writerApp))
		g.Expect(err).NotTo(HaveOccurred())
		before = lastMatch(syncedRE, logs)
		node := &corev1.Node{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Name: victim}, node)).To(Succeed())
		bootID := node.Status.NodeInfo.BootID
		start := time.Now()
		machine := killWorker(t, ctx, key, vmi, killQemu)
		s.timeline.add(step, "qemu of "+victim+" killed after record "+strconv.Itoa(before), 0)

		g.Eventually(func(g Gomega) {
			p := runningPod(g, ctx, tc, writerApp)
			g.Expect(p.Spec.NodeName).NotTo(Equal(victim))
			logs, err := logsOf(ctx, tc, p)
			g.Expect(err).NotTo(HaveOccurred())
			m := intactRE.FindStringSubmatch(logs)
			g.Expect(m).NotTo(BeNil(), "the writer's first line")
			intact, _ := strconv.Atoi(m[1])
			g.Expect(intact).To(BeNumerically(">=", before), "records intact after the kill, of %d synced before it", before)
			s.timeline.add(step, "writer running on "+m[2]+", intact through "+m[1], time.Since(start))
		}, createTimeout, lbPoll).Should(Succeed(), "the writer back on another worker")

		expectRejoined(t, ctx, key, tc, victim, bootID)
		g.Expect(machineOfNode(t, key, victim)).To(Equal(machine), "the node's Machine")
		expectNodesReady(t, tc, 2)
		s.timeline.add(step, "the killed worker back, the same node", time.Since(start))

		start = time.Now()
		g.Expect(tc.Delete(ctx, dep)).To(Succeed())
		g.Expect(tc.Delete(ctx, pvc)).To(Succeed())
		g.Eventually(func(g Gomega) {
			hostPVCs := &corev1.PersistentVolumeClaimList{}
			g.Expect(s.host.List(ctx, hostPVCs, client.InNamespace(key.Namespace), client.MatchingLabels{csicontroller.ClusterLabel: key.Name})).To(Succeed())
			g.Expect(hostPVCs.Items).To(BeEmpty(), "host claims of the tenant's volumes")
		}, tenantTimeout, lbPoll).Should(Succeed())
		s.timeline.add(step, "claim deleted: no host claim left", time.Since(start))
	})

	t.Run("delete", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), deleteTimeout)
		defer cancel()
		_, err := knestCmd(t, ctx, "delete", key.Name, "-n", key.Namespace, "--timeout", deleteTimeout.String())
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "knest delete")
		expectNamespaceEmpty(t, key.Namespace)
	})
}

// writer is a claim of the tenant's default class and a Deployment whose one pod
// runs writerScript on it. The pod tolerates an unreachable node for 20 s only, so
// that it is replaced on the other worker well before the 5-minute default; a
// ReplicaSet does not wait for its pod stuck terminating on that node (a Recreate
// Deployment would).
func writer() (*corev1.PersistentVolumeClaim, *appsv1.Deployment) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: writerApp, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	labels := map[string]string{"app": writerApp}
	toleration := func(taint string) corev1.Toleration {
		return corev1.Toleration{Key: taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](20)}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: writerApp, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(1)),
					Tolerations:                   []corev1.Toleration{toleration(corev1.TaintNodeUnreachable), toleration(corev1.TaintNodeNotReady)},
					Containers: []corev1.Container{{
						Name: "app", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
						Command:      []string{"/bin/busybox", "sh", "-c", writerScript},
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
	return pvc, dep
}

// runningPod is the app's one running pod that is not being deleted.
func runningPod(g Gomega, ctx context.Context, tc tenant, app string) *corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(tc.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": app})).To(Succeed())
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			running = append(running, p)
		}
	}
	g.Expect(running).To(HaveLen(1), "running pods of %s", app)
	return &running[0]
}

// logsOf reads a pod's logs through the tenant API; an error is for the caller's
// Eventually to retry. The read is bounded: the API server reaches the kubelet
// through konnectivity, and a tunnel lost mid-read would otherwise hold the caller's
// Eventually past its timeout.
func logsOf(ctx context.Context, tc tenant, pod *corev1.Pod) (string, error) {
	cs, err := kubernetes.NewForConfig(tc.cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(b), err
}

// lastMatch is the number in re's last match in s, 0 if none.
func lastMatch(re *regexp.Regexp, s string) int {
	m := re.FindAllStringSubmatch(s, -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}
