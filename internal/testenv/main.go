package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Main is the TestMain of a package whose tests share one test bed: it starts the
// bed into *env, runs the tests and stops it; a bed that does not stop fails the run.
func Main(m *testing.M, env **Env) {
	var err error
	if *env, err = Start(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the test bed: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*env).Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to stop the test bed: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// EndJob writes the status the Job controller would when the Job's pod succeeded or,
// with failed, when it ran out of retries; no Job controller runs on the bed.
func EndJob(ctx context.Context, c client.Client, job *batchv1.Job, failed bool) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		return err
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	if failed {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	}
	return c.Status().Update(ctx, job)
}
