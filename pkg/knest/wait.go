package knest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/scale"
)

// errWaitTimeout is the cause of a wait's context ending at its timeout.
var errWaitTimeout = errors.New("wait timed out")

// WaitOption configures Wait.
type WaitOption func(*waitOptions)

type waitOptions struct {
	timeout time.Duration
	// noParts leaves out the "control plane 1/1 ready" lines: while machines are
	// replaced the counts say little, and the caller reports per machine.
	noParts bool
	// pending adds what else must hold before the wait ends (see scale.Pending).
	pending func(*knestv1.NestedCluster) []string
	// beforeReady runs once the cluster is ready, before that is printed.
	beforeReady func()
}

// WaitWithTimeout bounds the wait (default 30 minutes). Waits never run forever.
func WaitWithTimeout(d time.Duration) WaitOption {
	return func(o *waitOptions) { o.timeout = d }
}

func newWaitOptions(opts []WaitOption) waitOptions {
	o := waitOptions{timeout: 30 * time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Wait waits until the NestedCluster's status has reached its spec (see
// scale.Converged), printing each part as it becomes ready. It fails when the timeout
// passes, the cluster's phase is Failed, or the cluster is paused or deleted; the
// error names the condition that blocks.
func (c *Client) Wait(ctx context.Context, key client.ObjectKey, opts ...WaitOption) error {
	o := newWaitOptions(opts)
	status := cli.StatusForLogger(c.logger)
	defer status.End()
	status.Start(fmt.Sprintf("Waiting for cluster %s to be ready (timeout %s)", key.Name, o.timeout))

	r := readyReporter{status: status, done: map[string]bool{}, noParts: o.noParts, pending: o.pending}
	var last *knestv1.NestedCluster
	err := c.watchCluster(ctx, key, o.timeout, func(nc *knestv1.NestedCluster) (bool, error) {
		if nc == nil {
			return false, fmt.Errorf("cluster %s was deleted while waiting for it to be ready", key.Name)
		}
		last = nc
		current := nc.Status.ObservedGeneration >= nc.Generation
		switch {
		case nc.DeletionTimestamp != nil:
			return false, fmt.Errorf("cluster %s is being deleted", key.Name)
		case nc.Spec.Paused:
			return false, fmt.Errorf("cluster %s is paused: knest and Cluster API leave it alone until spec.paused is false", key.Name)
		case current && nc.Status.Phase == knestv1.PhaseFailed:
			return false, fmt.Errorf("cluster %s failed: %s", key.Name, describeBlocking(nc, o.pending))
		}
		r.observe(nc)
		if scale.Converged(nc) && (o.pending == nil || len(o.pending(nc)) == 0) {
			if o.beforeReady != nil {
				o.beforeReady()
			}
			status.End()
			status.Success(fmt.Sprintf("cluster %s is ready", key.Name))
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, errWaitTimeout) {
		status.End()
		status.Failure(fmt.Sprintf("cluster %s is not ready after %s", key.Name, o.timeout))
		return fmt.Errorf("timed out after %s waiting for cluster %s to be ready: %s", o.timeout, key.Name, describeBlocking(last, o.pending))
	}
	if errors.Is(err, context.Canceled) {
		status.End()
		return fmt.Errorf("stopped waiting for cluster %s to be ready; it keeps being built, see knest get %s -n %s", key.Name, key.Name, key.Namespace)
	}
	if err != nil {
		status.End()
		status.Failure(fmt.Sprintf("cluster %s is not ready", key.Name))
	}
	return err
}

// WaitForDeletion waits until the NestedCluster is gone. The controller's finalizer
// keeps it until every object it created on the host is gone.
func (c *Client) WaitForDeletion(ctx context.Context, key client.ObjectKey, opts ...WaitOption) error {
	o := newWaitOptions(opts)
	status := cli.StatusForLogger(c.logger)
	defer status.End()
	status.Start(fmt.Sprintf("Waiting for cluster %s to be deleted (timeout %s)", key.Name, o.timeout))
	var last *knestv1.NestedCluster
	err := c.watchCluster(ctx, key, o.timeout, func(nc *knestv1.NestedCluster) (bool, error) {
		if nc == nil {
			return true, nil
		}
		last = nc
		if b := scale.Blocking(nc); b != nil && b.Message != "" {
			status.Update(fmt.Sprintf("Deleting cluster %s: %s", key.Name, b.Message))
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errWaitTimeout):
		status.End()
		status.Failure(fmt.Sprintf("cluster %s is still there after %s", key.Name, o.timeout))
		return fmt.Errorf("timed out after %s waiting for cluster %s to be deleted: %s", o.timeout, key.Name, describeDeletion(last))
	case errors.Is(err, context.Canceled):
		status.End()
		return fmt.Errorf("stopped waiting for cluster %s to be deleted; its deletion goes on", key.Name)
	case err != nil:
		return err
	}
	status.End()
	status.Success(fmt.Sprintf("cluster %s deleted", key.Name))
	return nil
}

// watchCluster calls check with the NestedCluster whenever it changes, and at least
// every poll interval, until check says done or fails, or timeout passes (then it
// returns an error wrapping errWaitTimeout). check gets nil once the object is gone.
func (c *Client) watchCluster(ctx context.Context, key client.ObjectKey, timeout time.Duration, check func(*knestv1.NestedCluster) (bool, error)) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
	defer cancel()
	ended := func() error {
		if errors.Is(context.Cause(ctx), errWaitTimeout) {
			return errWaitTimeout
		}
		return ctx.Err()
	}
	for {
		started := time.Now()
		nc := &knestv1.NestedCluster{}
		err := c.c.Get(ctx, key, nc)
		switch {
		case apierrors.IsNotFound(err):
			return doneOrErr(check(nil))
		case err != nil:
			if ctx.Err() != nil {
				return ended()
			}
			// A flaky connection should not end a long wait; the timeout bounds it.
			c.logger.V(1).Info("Failed to read cluster, retrying", "cluster", key.String(), "error", err.Error())
		default:
			if done, err := check(nc); done || err != nil {
				return err
			}
			if err := c.watchChanges(ctx, key, nc.ResourceVersion, check); err != errWatchEnded {
				if err == nil || ctx.Err() == nil {
					return err
				}
				return ended()
			}
		}
		// Do not hammer an API server that keeps closing watches at once.
		if wait := time.Second - time.Since(started); wait > 0 {
			select {
			case <-ctx.Done():
				return ended()
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return ended()
		}
	}
}

var errWatchEnded = errors.New("watch ended")

// watchChanges watches the NestedCluster from resourceVersion and calls check on each
// change. It returns errWatchEnded when the caller should read the object again (the
// watch closed, failed, or the poll interval passed).
func (c *Client) watchChanges(ctx context.Context, key client.ObjectKey, resourceVersion string, check func(*knestv1.NestedCluster) (bool, error)) error {
	w, err := c.c.Watch(ctx, &knestv1.NestedClusterList{}, &client.ListOptions{
		Namespace:     key.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
		Raw:           &metav1.ListOptions{ResourceVersion: resourceVersion},
	})
	if err != nil {
		c.logger.V(1).Info("Failed to watch cluster, polling", "cluster", key.String(), "error", err.Error())
		return c.sleep(ctx)
	}
	defer w.Stop()
	poll := time.NewTimer(c.pollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
			return errWatchEnded
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errWatchEnded
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				nc, ok := ev.Object.(*knestv1.NestedCluster)
				if !ok {
					return errWatchEnded
				}
				if done, err := check(nc); done || err != nil {
					return err
				}
			case watch.Deleted:
				return doneOrErr(check(nil))
			case watch.Error:
				c.logger.V(1).Info("Watch of cluster failed, reading it again", "cluster", key.String(), "status", apierrors.FromObject(ev.Object).Error())
				return errWatchEnded
			}
		}
	}
}

func (c *Client) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.pollInterval):
		return errWatchEnded
	}
}

func doneOrErr(done bool, err error) error {
	if err != nil {
		return err
	}
	if !done {
		return errors.New("the cluster is gone")
	}
	return nil
}

// readyReporter prints each part of a cluster once as it becomes ready.
type readyReporter struct {
	status  *cli.Status
	done    map[string]bool
	noParts bool
	pending func(*knestv1.NestedCluster) []string
}

func (r *readyReporter) observe(nc *knestv1.NestedCluster) {
	st := nc.Status
	if st.ObservedGeneration >= nc.Generation && !r.noParts {
		if want := nc.Spec.ControlPlane.Replicas; want > 0 && st.ControlPlane.Desired == want && st.ControlPlane.Ready == want {
			r.once("control-plane", fmt.Sprintf("control plane %d/%d ready", st.ControlPlane.Ready, want))
		}
		for i := range nc.Spec.Workers {
			p := &nc.Spec.Workers[i]
			want, known := scale.PoolWant(nc, *p)
			got, _ := scale.PoolStatus(nc, p.Name)
			if known && got.Desired == want && got.Ready == want {
				r.once("pool/"+p.Name, fmt.Sprintf("%s %d/%d ready", poolTitle(p.Name), got.Ready, want))
			}
		}
	}
	if st.Endpoint != "" && !r.noParts {
		r.once("endpoint", "endpoint "+st.Endpoint)
	}
	activity := fmt.Sprintf("Waiting for cluster %s", nc.Name)
	if st.Phase != "" {
		activity += " (" + string(st.Phase) + ")"
	}
	if pending := allPending(nc, r.pending); len(pending) > 0 {
		activity += ": " + pending[0]
	}
	r.status.Update(activity)
}

func (r *readyReporter) once(key, msg string) {
	if r.done[key] {
		return
	}
	r.done[key] = true
	r.status.Success(msg)
}

// poolTitle names a pool in progress lines: the default pool is just "workers".
func poolTitle(pool string) string {
	if pool == knestv1.DefaultPoolName {
		return pool
	}
	return "pool " + pool
}

// allPending is scale.Pending and what extra adds.
func allPending(nc *knestv1.NestedCluster, extra func(*knestv1.NestedCluster) []string) []string {
	out := scale.Pending(nc)
	if extra != nil {
		out = append(out, extra(nc)...)
	}
	return out
}

// describeBlocking says, for an error message, what keeps nc from being ready; extra
// (may be nil) adds what else the wait was for.
func describeBlocking(nc *knestv1.NestedCluster, extra func(*knestv1.NestedCluster) []string) string {
	if nc == nil {
		return "the cluster was never read"
	}
	if len(nc.Status.Conditions) == 0 && nc.Status.ObservedGeneration == 0 {
		return "the knest controller has not reported any status for it; is the controller running on the host cluster?"
	}
	var parts []string
	if b := scale.Blocking(nc); b != nil {
		parts = append(parts, describeCondition(b))
	}
	if pending := allPending(nc, extra); len(pending) > 0 {
		parts = append(parts, "waiting for "+strings.Join(pending, ", "))
	}
	if nc.Status.Phase != "" {
		parts = append(parts, "phase "+string(nc.Status.Phase))
	}
	return strings.Join(parts, "; ")
}

func describeDeletion(nc *knestv1.NestedCluster) string {
	if nc == nil {
		return "the cluster was never read"
	}
	var parts []string
	if len(nc.Finalizers) > 0 {
		parts = append(parts, "finalizers "+strings.Join(nc.Finalizers, ", ")+" remain (the controller removes its own once everything it created is gone)")
	}
	if b := scale.Blocking(nc); b != nil {
		parts = append(parts, describeCondition(b))
	}
	if len(parts) == 0 {
		return "it still exists"
	}
	return strings.Join(parts, "; ")
}

func describeCondition(c *metav1.Condition) string {
	s := fmt.Sprintf("condition %s is %s", c.Type, c.Status)
	if c.Reason != "" {
		s += ", reason " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
