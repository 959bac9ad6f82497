package etcdbackup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
)

// withSnapshot gives the cluster its CAs and one snapshot, as a backup Job's pod
// reports it, and waits for status to list it.
func withSnapshot(g Gomega, nc *knestv1.NestedCluster) string {
	giveEtcdCA(g, nc)
	// The test bed's API plays the tenant's (as in nestedcluster's
	// TestBlankControlPlaneIsReported):
	// a restore is done when it answers as the same cluster.
	g.Expect(env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret.Name(nc.Name, secret.Kubeconfig), Namespace: nc.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: nc.Name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{secret.KubeconfigDataName: env.Kubeconfig()},
	})).To(Succeed())
	snap := "20261127T090000Z.db"
	t0, _ := time.Parse("20060102T150405Z.db", snap)
	finishBackupPod(g, nc, "b-1", 0, result(g, snap, snap), t0)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Snapshots).To(Equal([]string{snap}))
	}, timeout, interval).Should(Succeed())
	return snap
}

// giveHostedControlPlane creates the HostedControlPlane the NestedCluster
// controller renders for nc: a hosted restore stops and starts etcd through it.
func giveHostedControlPlane(g Gomega, nc *knestv1.NestedCluster) *hcpv1.HostedControlPlane {
	env.Get(g, nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	hcp := graph.HostedControlPlane
	g.Expect(hcp).NotTo(BeNil())
	g.Expect(env.Client.Create(context.Background(), hcp)).To(Succeed())
	return hcp
}

// jobClaims are the claims a Job's pods mount.
func jobClaims(job *batchv1.Job) []string {
	var claims []string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return claims
}

// completeJob writes what the Job controller writes when a Job's pod ends.
func completeJob(g Gomega, job *batchv1.Job, failed bool) {
	g.Expect(testenv.EndJob(context.Background(), env.Client, job, failed)).To(Succeed())
}

func TestHostedRestoreStopsEtcdRunsTheJobAndStartsItAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "rh")
	nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	snap := withSnapshot(g, nc)
	hcp := giveHostedControlPlane(g, nc)

	// A snapshot the volume does not have is refused, and the request removed.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, "20261127T100000Z.db")
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Annotations).NotTo(HaveKey(knestv1.RestoreFromAnnotation))
		g.Expect(nc.Status.Backup.Restore).NotTo(BeNil())
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreFailed))
		g.Expect(nc.Status.Backup.Restore.Message).To(ContainSubstring("has no snapshot 20261127T100000Z.db; it has: " + snap))
	}, timeout, interval).Should(Succeed())

	// Not done while the tenant's API answers as another cluster (a control plane
	// still booting on the old data would): known as another one from the start.
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}
	env.Get(g, kubeSystem)
	known := string(kubeSystem.UID)
	g.Eventually(func() error {
		env.Get(g, nc)
		nc.Status.TenantID = "0f6b1f2e-0000-4000-8000-000000000000"
		return env.Client.Status().Update(ctx, nc)
	}, timeout, interval).Should(Succeed())
	update(g, nc, func(nc *knestv1.NestedCluster) {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, snap)
	})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backup.RestoreJobName(nc.Name, 0)}}
	g.Eventually(func(g Gomega) {
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).To(HaveKeyWithValue(hcpv1.EtcdStoppedAnnotation, snap), "etcd stopped first")
		env.Get(g, job)
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreRunning))
		g.Expect(nc.Status.Backup.Restore.Message).To(ContainSubstring("Restoring with Job"))
	}, timeout, interval).Should(Succeed())
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--snapshot=/backups/"+snap, "--name=rh-etcd-0",
		"--peer-url="+hosted.EtcdMember(nc.Name, ns, 0).PeerURL, "--data-dir=/var/lib/etcd"))
	g.Expect(strings.Join(c.Args, " ")).NotTo(ContainSubstring("--initial-cluster"), "a member alone")
	g.Expect(jobClaims(job)).To(ConsistOf("rh-etcd-backups", "data-rh-etcd-0"))
	// No scheduled snapshot of an etcd being replaced.
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backup.CronJobName(nc.Name)}}
	env.Get(g, cj)
	g.Expect(*cj.Spec.Suspend).To(BeTrue())

	completeJob(g, job, false)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreRunning))
		g.Expect(nc.Status.Backup.Restore.Message).To(ContainSubstring("answers as another cluster"))
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).NotTo(HaveKey(hcpv1.EtcdStoppedAnnotation), "etcd runs again meanwhile")
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		env.Get(g, nc)
		nc.Status.TenantID = known
		return env.Client.Status().Update(ctx, nc)
	}, timeout, interval).Should(Succeed())

	// The API answers as the same cluster (over the controller's connection), but
	// its pod is out of its Service, unready since etcd stopped: new clients would
	// be refused, so the restore is not done yet (no kubelet here: the test plays
	// the API server's pod).
	apiServer := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rh-control-plane-0", Labels: hosted.APIServerSelector(nc.Name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.35.4"}}},
	}
	g.Expect(env.Client.Create(ctx, apiServer)).To(Succeed())
	apiServer.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	g.Expect(env.Client.Status().Update(ctx, apiServer)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Message).To(HaveSuffix("waiting for the tenant's API: no API server pod is ready yet"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreRunning))
	}, 2*time.Second, interval).Should(Succeed())
	apiServer.Status.Conditions[0].Status = corev1.ConditionTrue
	g.Expect(env.Client.Status().Update(ctx, apiServer)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Annotations).NotTo(HaveKey(knestv1.RestoreFromAnnotation))
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreSucceeded))
		g.Expect(nc.Status.Backup.Restore.FinishedAt).NotTo(BeNil())
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).NotTo(HaveKey(hcpv1.EtcdStoppedAnnotation), "etcd starts again")
		env.Get(g, cj)
		g.Expect(*cj.Spec.Suspend).To(BeFalse())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)
		g.Expect(apierrors.IsNotFound(err) || !job.DeletionTimestamp.IsZero()).To(BeTrue(), "the Job goes")
	}, timeout, interval).Should(Succeed())

	// Once the old Job is gone, a second restore of the same snapshot runs anew and
	// reports the Job's failure.
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)) }, timeout, interval).Should(BeTrue())
	update(g, nc, func(nc *knestv1.NestedCluster) {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, snap)
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, job)
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreRunning))
	}, timeout, interval).Should(Succeed())
	completeJob(g, job, true)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreFailed))
		g.Expect(nc.Status.Backup.Restore.Message).To(ContainSubstring("etcd started again on its old data"))
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).NotTo(HaveKey(hcpv1.EtcdStoppedAnnotation))
	}, timeout, interval).Should(Succeed())
}

// Three hosted members: the restore waits for every etcd pod to go, then restores
// each member by its own Job on its own claim, all from the snapshot and with the
// same initial cluster; one failed Job fails the restore and says which.
func TestHostedRestoreOfThreeMembers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "r3")
	nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
	nc.Spec.ControlPlane.Etcd.Members = 3
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	snap := withSnapshot(g, nc)
	hcp := giveHostedControlPlane(g, nc)
	g.Expect(hcp.Spec.Etcd.Members).To(BeEquivalentTo(3))

	// A member still running (no kubelet here: the test plays the StatefulSet's pod).
	member := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r3-etcd-1", Labels: hosted.EtcdSelector(nc.Name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.6-0"}}},
	}
	g.Expect(env.Client.Create(ctx, member)).To(Succeed())
	update(g, nc, func(nc *knestv1.NestedCluster) {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, snap)
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).To(HaveKeyWithValue(hcpv1.EtcdStoppedAnnotation, snap))
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore).NotTo(BeNil())
		g.Expect(nc.Status.Backup.Restore.Message).To(Equal("Waiting for etcd's pods to stop (1 left)"))
	}, timeout, interval).Should(Succeed())
	jobs := &batchv1.JobList{}
	g.Expect(env.Client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentRestore)))).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no member is written while one runs")
	g.Expect(env.Client.Delete(ctx, member, client.GracePeriodSeconds(0))).To(Succeed())

	initial := "--initial-cluster=r3-etcd-0=https://r3-etcd-0.r3-etcd." + ns + ".svc:2380,r3-etcd-1=https://r3-etcd-1.r3-etcd." + ns +
		".svc:2380,r3-etcd-2=https://r3-etcd-2.r3-etcd." + ns + ".svc:2380"
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentRestore)))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(3))
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Message).To(Equal("Restoring 3 etcd members, a Job each"))
	}, timeout, interval).Should(Succeed())
	for i := range 3 {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backup.RestoreJobName(nc.Name, i)}}
		env.Get(g, job)
		m := hosted.EtcdMember(nc.Name, ns, i)
		g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--snapshot=/backups/"+snap, "--name="+m.Name, "--peer-url="+m.PeerURL, initial))
		g.Expect(jobClaims(job)).To(ConsistOf("r3-etcd-backups", hosted.EtcdClaimName(nc.Name, i)))
		if i < 2 {
			completeJob(g, job, false)
			// Not done while a member's Job runs: etcd stays stopped.
			g.Consistently(func(g Gomega) {
				env.Get(g, hcp)
				g.Expect(hcp.Annotations).To(HaveKey(hcpv1.EtcdStoppedAnnotation))
			}, time.Second, interval).Should(Succeed())
		} else {
			completeJob(g, job, true)
		}
	}
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreFailed))
		g.Expect(nc.Status.Backup.Restore.Message).To(ContainSubstring("Job r3-etcd-restore-2 failed, and etcd started again on what its Jobs left: restore again"))
		env.Get(g, hcp)
		g.Expect(hcp.Annotations).NotTo(HaveKey(hcpv1.EtcdStoppedAnnotation))
	}, timeout, interval).Should(Succeed())
}

func TestVMRestoreNeedsOneControlPlaneNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "rv")
	nc.Spec.ControlPlane.Replicas = 3
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	snap := withSnapshot(g, nc)
	update(g, nc, func(nc *knestv1.NestedCluster) {
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, snap)
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Annotations).NotTo(HaveKey(knestv1.RestoreFromAnnotation))
		r := nc.Status.Backup.Restore
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Phase).To(Equal(knestv1.RestoreFailed))
		g.Expect(strings.Contains(r.Message, "scale controlPlane.replicas to 1")).To(BeTrue(), r.Message)
	}, timeout, interval).Should(Succeed())
}
