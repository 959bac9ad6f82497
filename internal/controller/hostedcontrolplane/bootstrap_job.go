package hostedcontrolplane

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// The wait before a failed kubeadm Job is made anew: jobBackoffBase doubled for
// each failure in a row, at most jobBackoffMax.
const (
	jobBackoffBase = 10 * time.Second
	jobBackoffMax  = 5 * time.Minute
)

// reconcileBootstrapJob runs kubeadm's phases in the tenant with the version's
// kubeadm, again after every change of version or configuration (kube-proxy,
// CoreDNS, kubelet-config move with it), and waits until they succeeded.
func (r *Reconciler) reconcileBootstrapJob(ctx context.Context, s *scope) (stepResult, error) {
	// A Job's pod template is immutable: its name carries the template's hash, so a
	// changed one is a new Job, never an apply to the old.
	job := s.in.Job(s.configHash)
	if _, err := r.applier().Apply(ctx, s.hcp, job); err != nil {
		return stepResult{}, err
	}
	if failed := jobFailed(job); failed != nil {
		wait, err := r.retryJob(ctx, s.hcp, job, failed)
		return stepResult{wait: true, requeueAfter: wait}, err
	}
	if !jobSucceeded(job) {
		setWaitingForTenant(s.hcp, job.Name)
		return stepResult{wait: true}, nil
	}
	s.hcp.Status.FailedBootstrapJobs = 0
	return stepResult{}, r.pruneJobs(ctx, s.hcp, s.cluster.Name, job.Name)
}

// jobBackoff is the wait before a failed kubeadm Job is made anew after failures
// in a row.
func jobBackoff(failures int32) time.Duration {
	d := jobBackoffBase
	for i := int32(1); i < failures && d < jobBackoffMax; i++ {
		d *= 2
	}
	return min(d, jobBackoffMax)
}

// bootstrapFailures counts the failed Job in view: a failure is counted when first
// seen; while it waits out its backoff, Available already says so.
func bootstrapFailures(hcp *hcpv1.HostedControlPlane) int32 {
	failures := hcp.Status.FailedBootstrapJobs
	if conditions.GetReason(hcp, hcpv1.AvailableCondition) != hcpv1.TenantBootstrapFailedReason {
		failures++
	}
	return failures
}

// retryJob reports a failed kubeadm Job and deletes it once its backoff has passed,
// so the next reconcile makes it anew (the cluster's state is kept; kubeadm's
// phases create or update). It returns what is left of the backoff.
func (r *Reconciler) retryJob(ctx context.Context, hcp *hcpv1.HostedControlPlane, job *batchv1.Job, failed *batchv1.JobCondition) (time.Duration, error) {
	failures := bootstrapFailures(hcp)
	hcp.Status.FailedBootstrapJobs = failures
	wait := jobBackoff(failures) - time.Since(failed.LastTransitionTime.Time)
	setTenantBootstrapFailed(hcp, job.Name, failed, failures, wait)
	if wait > 0 {
		return wait, nil
	}
	// Its deletion brings the HostedControlPlane back (it owns the Job).
	if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("failed to delete failed Job %s: %w", job.Name, err)
	}
	return 0, nil
}

func jobFailed(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// pruneJobs deletes the cluster's kubeadm Jobs of earlier versions or
// configurations once the current one has succeeded.
func (r *Reconciler) pruneJobs(ctx context.Context, hcp *hcpv1.HostedControlPlane, clusterName, keep string) error {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(hcp.Namespace), client.MatchingLabels(hosted.JobSelector(clusterName))); err != nil {
		return err
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.Name == keep || !metav1.IsControlledBy(j, hcp) {
			continue
		}
		if err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
