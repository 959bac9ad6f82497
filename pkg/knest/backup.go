package knest

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

// Backup takes a snapshot of the cluster's etcd now: a Job from the cluster's
// backup CronJob, as `kubectl create job --from=cronjob/...` makes one. It waits
// up to timeout for the snapshot to show in status.backup and returns it.
func (c *Client) Backup(ctx context.Context, key client.ObjectKey, timeout time.Duration) (*knestv1.Snapshot, error) {
	nc := &knestv1.NestedCluster{}
	if err := c.c.Get(ctx, key, nc); err != nil {
		return nil, notFoundOr(err, key, "failed to get cluster %s in namespace %s")
	}
	if nc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("cluster %s is being deleted", key.Name)
	}
	cj := &batchv1.CronJob{}
	if err := c.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: backup.CronJobName(key.Name)}, cj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("cluster %s has no backup CronJob yet: knest makes it once the control plane has its certificates; try again when it is running", key.Name)
		}
		return nil, err
	}
	job := backup.JobFromCronJob(cj, time.Now())
	if err := c.c.Create(ctx, job); err != nil {
		return nil, fmt.Errorf("failed to create backup Job %s: %w", job.Name, err)
	}
	status := cli.StatusForLogger(c.logger)
	defer status.End()
	status.Start(fmt.Sprintf("Taking a snapshot of cluster %s (Job %s, timeout %s)", key.Name, job.Name, timeout))
	var snap *knestv1.Snapshot
	err := c.watchCluster(ctx, key, timeout, func(nc *knestv1.NestedCluster) (bool, error) {
		if nc == nil {
			return false, fmt.Errorf("cluster %s was deleted", key.Name)
		}
		if s := nc.Status.Backup.LastSnapshot; s != nil && !s.TakenAt.Before(&metav1.Time{Time: job.CreationTimestamp.Add(-time.Second)}) {
			snap = s
			return true, nil
		}
		current := &batchv1.Job{}
		if err := c.c.Get(ctx, client.ObjectKeyFromObject(job), current); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range current.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == "True" {
				return false, fmt.Errorf("backup Job %s failed: %s", job.Name, orDefault(nc.Status.Backup.LastFailure, cond.Message))
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, waitError(err, fmt.Sprintf("the snapshot of cluster %s", key.Name), timeout)
	}
	status.Success(fmt.Sprintf("snapshot %s of cluster %s taken (etcd revision %d, %s)", snap.Name, key.Name, snap.Revision, humanBytes(snap.SizeBytes)))
	return snap, nil
}

// Restore asks the controller to bring the cluster's etcd back to snapshot (the
// knest.dev/restore-from annotation), after the same checks the controller makes.
// With timeout > 0 it waits for the restore and then for the cluster to be ready.
func (c *Client) Restore(ctx context.Context, key client.ObjectKey, snapshot string, timeout time.Duration) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc := &knestv1.NestedCluster{}
		if err := c.c.Get(ctx, key, nc); err != nil {
			return notFoundOr(err, key, "failed to get cluster %s in namespace %s")
		}
		if nc.DeletionTimestamp != nil {
			return fmt.Errorf("cluster %s is being deleted", key.Name)
		}
		if running, ok := nc.Annotations[knestv1.RestoreFromAnnotation]; ok && running != snapshot {
			return fmt.Errorf("cluster %s is already being restored from %s", key.Name, running)
		}
		if msg := backup.Refusal(nc, snapshot); msg != "" {
			return fmt.Errorf("cannot restore cluster %s: %s", key.Name, msg)
		}
		orig := nc.DeepCopy()
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, knestv1.RestoreFromAnnotation, snapshot)
		return c.c.Patch(ctx, nc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil || timeout == 0 {
		return err
	}
	started := time.Now()
	status := cli.StatusForLogger(c.logger)
	status.Start(fmt.Sprintf("Restoring cluster %s from %s (timeout %s)", key.Name, snapshot, timeout))
	err = c.watchCluster(ctx, key, timeout, func(nc *knestv1.NestedCluster) (bool, error) {
		if nc == nil {
			return false, fmt.Errorf("cluster %s was deleted", key.Name)
		}
		r := nc.Status.Backup.Restore
		if _, asked := nc.Annotations[knestv1.RestoreFromAnnotation]; asked || r == nil || r.Snapshot != snapshot {
			if r != nil && r.Phase == knestv1.RestoreRunning && r.Message != "" {
				status.Update(fmt.Sprintf("Restoring cluster %s from %s: %s", key.Name, snapshot, r.Message))
			}
			return false, nil
		}
		if r.Phase == knestv1.RestoreFailed {
			return false, fmt.Errorf("restore of cluster %s from %s failed: %s", key.Name, snapshot, r.Message)
		}
		return r.Phase == knestv1.RestoreSucceeded, nil
	})
	status.End()
	if err != nil {
		return waitError(err, fmt.Sprintf("the restore of cluster %s", key.Name), timeout)
	}
	status.Success(fmt.Sprintf("cluster %s restored from %s: its API answers on the restored data", key.Name, snapshot))
	return c.Wait(ctx, key, WaitWithTimeout(max(timeout-time.Since(started), time.Minute).Round(time.Second)))
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// humanBytes is n in the largest binary unit that keeps it at 1 or more.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// waitError words a wait for what that ended without it.
func waitError(err error, what string, timeout time.Duration) error {
	switch {
	case errors.Is(err, errWaitTimeout):
		return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("stopped waiting for %s; it goes on", what)
	}
	return err
}
