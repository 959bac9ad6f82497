package etcdbackup_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/backup"
)

// giveEtcdCA makes the cluster's CAs as KubeadmControlPlane (or the hosted
// controller) would, which the backup client certificate is signed by.
func giveEtcdCA(g Gomega, nc *knestv1.NestedCluster) []byte {
	env.Get(g, nc)
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	owner := *metav1.NewControllerRef(nc, knestv1.GroupVersion.WithKind("NestedCluster"))
	g.Expect(certs.LookupOrGenerate(context.Background(), env.Client, client.ObjectKeyFromObject(nc), owner)).To(Succeed())
	return certs.GetByPurpose(secret.EtcdCA).KeyPair.Cert
}

// finishBackupPod is a backup Job's pod as kubelet leaves it: terminated, with
// the snapshot command's result, or its error, as the termination message.
func finishBackupPod(g Gomega, nc *knestv1.NestedCluster, name string, exit int32, msg string, at time.Time) {
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nc.Namespace, Labels: backup.Selector(nc.Name, backup.ComponentBackup)},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "snapshot", Image: testToolImage}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	phase := corev1.PodSucceeded
	if exit != 0 {
		phase = corev1.PodFailed
	}
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "snapshot", Image: testToolImage, ImageID: "sha256:0",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exit, Message: msg, StartedAt: metav1.NewTime(at.Add(-time.Second)), FinishedAt: metav1.NewTime(at),
		}},
	}}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
}

func result(g Gomega, name string, snapshots ...string) string {
	taken, err := time.Parse("20060102T150405Z.db", name)
	g.Expect(err).NotTo(HaveOccurred())
	return backup.Result{Name: name, TakenAt: taken, Revision: 42, SizeBytes: 1 << 20, Snapshots: snapshots}.Message()
}

func TestBackupsAreScheduledForEveryCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "bk")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())

	// Nothing before the etcd CA exists: the client certificate needs it.
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backup.CronJobName(nc.Name)}}
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cj), cj))
	}, 2*time.Second, interval).Should(BeTrue())
	caPEM := giveEtcdCA(g, nc)

	g.Eventually(func(g Gomega) {
		env.Get(g, cj)
		// The API server took the schedule the interval became.
		g.Expect(cj.Spec.Schedule).To(Equal("@every 1h0m0s"))
		g.Expect(*cj.Spec.Suspend).To(BeFalse())
		g.Expect(cj.Spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent))
		c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		g.Expect(c.Image).To(Equal(testToolImage))
		g.Expect(c.Args).To(ContainElements("--endpoint=https://bk-etcd."+ns+".svc:2379", "--keep=24"))
		g.Expect(metav1.IsControlledBy(cj, nc)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backup.ClaimName(nc.Name)}, claim)).To(Succeed())
	g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("4Gi"))
	g.Expect(claim.Spec.StorageClassName).To(BeNil(), "the host's default class")

	// A VM control plane's members are reached through a Service over their VMs.
	svc := &corev1.Service{}
	g.Eventually(func() error { // applied after the CronJob
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backup.ServiceName(nc.Name)}, svc)
	}, timeout, interval).Should(Succeed())
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"cluster.x-k8s.io/role": "control-plane", "cluster.x-k8s.io/cluster-name": "bk"}))
	g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(2379))

	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: backup.ClientCertName(nc.Name)}, s)).To(Succeed())
	block, _ := pem.Decode(s.Data[backup.ClientCertKey])
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	caBlock, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cert.CheckSignatureFrom(ca)).To(Succeed(), "signed by the cluster's etcd CA")
	g.Expect(cert.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}))

	// At rest, nothing is written again.
	rv := cj.ResourceVersion
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "touched", "1") })
	g.Consistently(func(g Gomega) {
		env.Get(g, cj)
		g.Expect(cj.ResourceVersion).To(Equal(rv))
	}, 2*time.Second, interval).Should(Succeed())

	// 0s: no schedule, `knest backup` still has the template.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Backup.Interval = &metav1.Duration{Duration: 0}
		nc.Spec.Backup.Keep = 3
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, cj)
		g.Expect(*cj.Spec.Suspend).To(BeTrue())
		g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--keep=3"))
	}, timeout, interval).Should(Succeed())
}

func TestBackupStatusFollowsTheJobsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "bks")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	giveEtcdCA(g, nc)

	first, second := "20261127T090000Z.db", "20261127T100000Z.db"
	t0, _ := time.Parse("20060102T150405Z.db", second)
	finishBackupPod(g, nc, "b-1", 0, result(g, first, first), t0.Add(-time.Hour))
	finishBackupPod(g, nc, "b-2", 0, result(g, second, first, second), t0)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		b := nc.Status.Backup
		g.Expect(b.LastSnapshot).NotTo(BeNil())
		g.Expect(b.LastSnapshot.Name).To(Equal(second), "the newest")
		g.Expect(b.LastSnapshot.Revision).To(BeEquivalentTo(42))
		g.Expect(b.Snapshots).To(Equal([]string{first, second}))
		g.Expect(b.LastFailure).To(BeEmpty())
	}, timeout, interval).Should(Succeed())

	// A failure after the last snapshot shows; the last good snapshot stays.
	finishBackupPod(g, nc, "b-3", 1, "Error: failed to take a snapshot from https://bks-etcd:2379: context deadline exceeded", t0.Add(time.Hour))
	// A Job's end brings the cluster back; here no Job ends, a touch does.
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "touched", "1") })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.LastFailure).To(ContainSubstring("context deadline exceeded"))
		g.Expect(nc.Status.Backup.LastSnapshot.Name).To(Equal(second))
	}, timeout, interval).Should(Succeed())

	// Pods pruned by the CronJob's history limit take nothing from status.
	for _, p := range []string{"b-1", "b-2", "b-3"} {
		g.Expect(env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p}}, client.GracePeriodSeconds(0))).To(Succeed())
	}
	third := "20261127T120000Z.db"
	finishBackupPod(g, nc, "b-4", 0, result(g, third, second, third), t0.Add(2*time.Hour))
	// A Job's end brings the cluster back; here no Job ends, a touch does.
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "touched", "2") })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Backup.LastSnapshot.Name).To(Equal(third))
		g.Expect(nc.Status.Backup.Snapshots).To(Equal([]string{second, third}))
		g.Expect(nc.Status.Backup.LastFailure).To(BeEmpty(), "a snapshot after the failure clears it")
	}, timeout, interval).Should(Succeed())
}

func ptrTo[T any](v T) *T { return &v }

func TestBackupSettingsAreValidated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	for _, tc := range []struct {
		name   string
		backup knestv1.BackupSpec
		want   string
	}{
		{"interval", knestv1.BackupSpec{Interval: &metav1.Duration{Duration: time.Minute}}, "backup.interval must be 0s (no schedule) or at least 5m"},
		{"keep", knestv1.BackupSpec{Keep: 501}, "spec.backup.keep"},
		{"size", knestv1.BackupSpec{Size: ptrTo(resource.MustParse("100Mi"))}, "backup.size must be from 1Gi to 1Ti"},
	} {
		nc := testenv.NestedCluster(ns, "v-"+tc.name)
		nc.Spec.Backup = tc.backup
		err := env.Client.Create(ctx, nc)
		g.Expect(err).To(HaveOccurred(), tc.name)
		g.Expect(err.Error()).To(ContainSubstring(tc.want), tc.name)
	}
	nc := testenv.NestedCluster(ns, "v-immutable")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	env.Get(g, nc)
	nc.Spec.Backup.StorageClassName = "fast"
	err := env.Client.Update(ctx, nc)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("backup.storageClassName cannot change after creation"))
}
