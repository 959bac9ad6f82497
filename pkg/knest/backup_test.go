package knest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/backup"
)

// giveCronJob creates the backup CronJob as the backup controller makes it.
func giveCronJob(t *testing.T, key client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	cj := backup.Input{NC: getCluster(g, t.Context(), key), Image: "knest.local/knest:test"}.CronJob()
	g.Expect(env.Client.Create(t.Context(), cj)).To(Succeed())
}

// backupJob waits for the one Job Backup makes.
func backupJob(t *testing.T, ns string) *batchv1.Job {
	t.Helper()
	jobs := &batchv1.JobList{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.List(t.Context(), jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	return &jobs.Items[0]
}

func TestBackupRunsTheCronJobsJobAndReturnsTheSnapshot(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1))
	c, out := newClient(t)

	_, err := c.Backup(t.Context(), key, time.Minute)
	g.Expect(err).To(MatchError(ContainSubstring("cluster demo has no backup CronJob yet")))

	giveCronJob(t, key)
	type result struct {
		snap *knestv1.Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := c.Backup(t.Context(), key, time.Minute)
		done <- result{snap, err}
	}()
	job := backupJob(t, ns)
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal("knest.local/knest:test"), "the CronJob's template")
	// A snapshot older than the Job is not this one.
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.Backup.LastSnapshot = &knestv1.Snapshot{Name: "20261127T090000Z.db", TakenAt: metav1.NewTime(job.CreationTimestamp.Add(-time.Hour))}
	})
	g.Consistently(done, time.Second).ShouldNot(Receive())
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.Backup.LastSnapshot = &knestv1.Snapshot{Name: "20261127T100000Z.db", TakenAt: metav1.Now(), Revision: 42, SizeBytes: 1 << 20}
	})
	var r result
	g.Eventually(done, 30*time.Second).Should(Receive(&r))
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.snap.Name).To(Equal("20261127T100000Z.db"))
	g.Expect(out.String()).To(ContainSubstring("✓ snapshot 20261127T100000Z.db of cluster demo taken (etcd revision 42"))
}

func TestBackupSaysWhyItsJobFailed(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1))
	giveCronJob(t, key)
	c, _ := newClient(t)

	done := make(chan error, 1)
	go func() {
		_, err := c.Backup(t.Context(), key, time.Minute)
		done <- err
	}()
	job := backupJob(t, ns)
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.Backup.LastFailure = "Error: failed to take a snapshot: context deadline exceeded"
	})
	g.Expect(testenv.EndJob(context.Background(), env.Client, job, true)).To(Succeed())
	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("backup Job " + job.Name + " failed: Error: failed to take a snapshot: context deadline exceeded")))
}

func TestRestoreAsksTheControllerAfterItsChecks(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1))
	snap, other := "20261127T090000Z.db", "20261127T100000Z.db"
	setStatus(t, key, func(nc *knestv1.NestedCluster) { nc.Status.Backup.Snapshots = []string{snap, other} })
	c, _ := newClient(t)

	g.Expect(c.Restore(t.Context(), key, "20261127T110000Z.db", 0)).To(MatchError(
		"cannot restore cluster demo: the backup volume has no snapshot 20261127T110000Z.db; it has: " + snap + ", " + other))
	g.Expect(getCluster(g, t.Context(), key).Annotations).NotTo(HaveKey(knestv1.RestoreFromAnnotation))

	g.Expect(c.Restore(t.Context(), key, snap, 0)).To(Succeed())
	g.Expect(getCluster(g, t.Context(), key).Annotations).To(HaveKeyWithValue(knestv1.RestoreFromAnnotation, snap))
	g.Expect(c.Restore(t.Context(), key, snap, 0)).To(Succeed(), "asking again for the same is no conflict")
	g.Expect(c.Restore(t.Context(), key, other, 0)).To(MatchError("cluster demo is already being restored from " + snap))
}

func TestRestoreWaitsForTheControllersVerdict(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key := createCluster(t, ns, pool("workers", 1))
	snap := "20261127T090000Z.db"
	setStatus(t, key, func(nc *knestv1.NestedCluster) { nc.Status.Backup.Snapshots = []string{snap} })
	c, _ := newClient(t)

	done := make(chan error, 1)
	go func() { done <- c.Restore(t.Context(), key, snap, time.Minute) }()
	g.Eventually(func() map[string]string { return getCluster(g, t.Context(), key).Annotations }, 10*time.Second).Should(HaveKey(knestv1.RestoreFromAnnotation))
	// The controller takes the request (removes the annotation) and fails it.
	g.Consistently(done, time.Second).ShouldNot(Receive())
	g.Eventually(func() error {
		nc := getCluster(g, t.Context(), key)
		delete(nc.Annotations, knestv1.RestoreFromAnnotation)
		return env.Client.Update(t.Context(), nc)
	}, 10*time.Second).Should(Succeed())
	setStatus(t, key, func(nc *knestv1.NestedCluster) {
		nc.Status.Backup.Restore = &knestv1.RestoreStatus{Snapshot: snap, Phase: knestv1.RestoreFailed, Message: "Job demo-etcd-restore-0 failed"}
	})
	var err error
	g.Eventually(done, 30*time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("restore of cluster demo from " + snap + " failed: Job demo-etcd-restore-0 failed")))
}
