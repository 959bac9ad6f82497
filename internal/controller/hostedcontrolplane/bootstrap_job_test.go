package hostedcontrolplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/hosted"
)

func TestJobBackoff(t *testing.T) {
	for failures, want := range map[int32]time.Duration{
		1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second,
		6: 5 * time.Minute, 7: 5 * time.Minute, 1000: 5 * time.Minute,
	} {
		if got := jobBackoff(failures); got != want {
			t.Errorf("jobBackoff(%d) = %s, want %s", failures, got, want)
		}
	}
}

// Only the Job controller's final conditions count: JobFailureTarget and
// JobSuccessCriteriaMet come first, while pods may still be terminating.
func TestJobEnd(t *testing.T) {
	g := NewWithT(t)
	job := func(conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: conds}}
	}
	cond := func(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: s, Reason: string(t)}
	}
	running := job()
	g.Expect(jobFailed(running)).To(BeNil())
	g.Expect(jobSucceeded(running)).To(BeFalse())

	failing := job(cond(batchv1.JobFailureTarget, corev1.ConditionTrue))
	g.Expect(jobFailed(failing)).To(BeNil())
	failed := job(cond(batchv1.JobFailureTarget, corev1.ConditionTrue), cond(batchv1.JobFailed, corev1.ConditionTrue))
	g.Expect(jobFailed(failed)).To(HaveField("Type", batchv1.JobFailed))
	g.Expect(jobSucceeded(failed)).To(BeFalse())
	g.Expect(jobFailed(job(cond(batchv1.JobFailed, corev1.ConditionFalse)))).To(BeNil())

	g.Expect(jobSucceeded(job(cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue)))).To(BeFalse())
	succeeded := job(cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue))
	g.Expect(jobSucceeded(succeeded)).To(BeTrue())
	g.Expect(jobFailed(succeeded)).To(BeNil())
}

// A failure counts once, when first seen, however many reconciles wait out its
// backoff.
func TestBootstrapFailures(t *testing.T) {
	g := NewWithT(t)
	hcp := &hcpv1.HostedControlPlane{}
	hcp.Status.FailedBootstrapJobs = 2
	setWaitingForTenant(hcp, "demo-kubeadm-0123abcd")
	g.Expect(bootstrapFailures(hcp)).To(BeEquivalentTo(3))
	setTenantBootstrapFailed(hcp, "demo-kubeadm-0123abcd", &batchv1.JobCondition{}, 3, time.Minute)
	hcp.Status.FailedBootstrapJobs = 3
	g.Expect(bootstrapFailures(hcp)).To(BeEquivalentTo(3))
}

// newJob makes a kubeadm Job of the scope's cluster, controlled by its
// HostedControlPlane when controlled.
func newJob(g Gomega, s *scope, name string, controlled bool) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.hcp.Namespace, Name: name, Labels: hosted.JobSelector(s.cluster.Name)},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "kubeadm", Image: "knest.local/kubeadm:test"}},
		}}},
	}
	if controlled {
		g.Expect(controllerutil.SetControllerReference(s.hcp, job, env.Scheme)).To(Succeed())
	}
	g.Expect(env.Client.Create(context.Background(), job)).To(Succeed())
	return job
}

func exists(g Gomega, obj client.Object) bool {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	return !apierrors.IsNotFound(err)
}

// A failed Job stays, reported, while its backoff runs, and is deleted once it has
// passed, so that the next reconcile makes it anew.
func TestRetryJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "retry", "10.95.0.10")
	job := newJob(g, s, "retry-kubeadm-00000001", true)

	justFailed := &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
		LastTransitionTime: metav1.Now()}
	wait, err := reconciler().retryJob(ctx, s.hcp, job, justFailed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeNumerically("~", 10*time.Second, time.Second))
	g.Expect(s.hcp.Status.FailedBootstrapJobs).To(BeEquivalentTo(1))
	g.Expect(conditions.GetReason(s.hcp, hcpv1.AvailableCondition)).To(Equal(hcpv1.TenantBootstrapFailedReason))
	g.Expect(exists(g, job)).To(BeTrue(), "deleted within its backoff")

	// The same failure, seen again after its backoff: still one in a row.
	past := justFailed.DeepCopy()
	past.LastTransitionTime = metav1.NewTime(time.Now().Add(-11 * time.Second))
	wait, err = reconciler().retryJob(ctx, s.hcp, job, past)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero())
	g.Expect(s.hcp.Status.FailedBootstrapJobs).To(BeEquivalentTo(1))
	g.Expect(exists(g, job)).To(BeFalse(), "kept after its backoff")

	// Already gone (deleted by an earlier reconcile): no error.
	_, err = reconciler().retryJob(ctx, s.hcp, job, past)
	g.Expect(err).NotTo(HaveOccurred())
}

// The step waits for its Job; once it succeeded, the failures in a row are
// forgotten and the Jobs of earlier configurations the control plane made are
// deleted, no other.
func TestReconcileBootstrapJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "boot", "10.95.0.11")
	s.configHash = "0123456789abcdef0123456789abcdef"
	s.hcp.Status.FailedBootstrapJobs = 2
	older := newJob(g, s, "boot-kubeadm-older000", true)
	foreign := newJob(g, s, "boot-kubeadm-foreign0", false)

	res, err := reconciler().reconcileBootstrapJob(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(stepResult{wait: true}))
	g.Expect(conditions.GetReason(s.hcp, hcpv1.AvailableCondition)).To(Equal(hcpv1.WaitingForTenantReason))
	current := s.in.Job(s.configHash)
	g.Expect(exists(g, current)).To(BeTrue())
	g.Expect(metav1.IsControlledBy(current, s.hcp)).To(BeTrue())

	g.Expect(testenv.EndJob(ctx, env.Client, current, false)).To(Succeed())
	res, err = reconciler().reconcileBootstrapJob(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(stepResult{}))
	g.Expect(s.hcp.Status.FailedBootstrapJobs).To(BeZero())
	g.Expect(exists(g, current)).To(BeTrue())
	g.Expect(exists(g, older)).To(BeFalse(), "an earlier configuration's Job kept")
	g.Expect(exists(g, foreign)).To(BeTrue(), "a Job the control plane does not control deleted")
}
