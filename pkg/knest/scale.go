package knest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/scale"
)

// DeleteMachineValue is the value knest gives Cluster API's delete-machine annotation
// (Cluster API only looks at the key).
const DeleteMachineValue = "knest"

type scaleOptions struct {
	wait time.Duration
}

// ScaleOption configures Scale.
type ScaleOption func(*scaleOptions)

// ScaleWithWait waits up to timeout for the cluster to reach its new size; 0 returns
// once the change is stored.
func ScaleWithWait(timeout time.Duration) ScaleOption {
	return func(o *scaleOptions) { o.wait = timeout }
}

// Scale applies req to the NestedCluster: it checks the request against the scaling
// rules (pkg/scale), marks the Machines of the nodes to remove with Cluster API's
// delete-machine annotation so exactly those go, then patches the spec (with an
// optimistic lock, retried on conflict). It returns the plan it applied.
func (c *Client) Scale(ctx context.Context, key client.ObjectKey, req scale.Request, opts ...ScaleOption) (scale.Plan, error) {
	var o scaleOptions
	for _, opt := range opts {
		opt(&o)
	}
	status := cli.StatusForLogger(c.logger)

	var plan scale.Plan
	var marked []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc := &knestv1.NestedCluster{}
		if err := c.c.Get(ctx, key, nc); err != nil {
			return notFoundOr(err, key, "failed to get cluster %s in namespace %s")
		}
		if nc.DeletionTimestamp != nil {
			return fmt.Errorf("cluster %s is being deleted", key.Name)
		}
		var machines []scale.Machine
		if len(req.RemoveNodes) > 0 {
			var err error
			if machines, err = c.machines(ctx, key); err != nil {
				return err
			}
		}
		var err error
		if plan, err = scale.Apply(nc.Spec, scale.WithCurrentSizes(req, nc), machines); err != nil {
			return fmt.Errorf("cannot scale cluster %s: %w", key.Name, err)
		}
		if len(plan.Changes) == 0 {
			return nil
		}
		added, err := c.markForDeletion(ctx, key.Namespace, plan.MarkForDeletion)
		marked = append(marked, added...)
		if err != nil {
			return err
		}
		orig := nc.DeepCopy()
		nc.Spec = plan.Spec
		if err := c.c.Patch(ctx, nc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("failed to scale cluster %s: %w", key.Name, err)
		}
		return nil
	})
	if err != nil {
		// Unmark what this call marked, so a later scale-down does not pick them.
		if uerr := c.unmark(ctx, key.Namespace, marked); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return scale.Plan{}, err
	}
	if len(plan.Changes) == 0 {
		status.Success(fmt.Sprintf("cluster %s already has that size; nothing to change", key.Name))
		return plan, nil
	}
	changes := make([]string, 0, len(plan.Changes))
	for _, ch := range plan.Changes {
		changes = append(changes, ch.String())
	}
	status.Success(fmt.Sprintf("cluster %s scaling: %s", key.Name, strings.Join(changes, ", ")))
	for _, m := range plan.MarkForDeletion {
		status.Success(fmt.Sprintf("node %s marked for removal", m))
	}
	if o.wait <= 0 {
		return plan, nil
	}
	if err := c.Wait(ctx, key, WaitWithTimeout(o.wait)); err != nil {
		return plan, fmt.Errorf("%w\nThe change (%s) stays applied and the controller keeps working on it; to undo it: %s",
			err, strings.Join(changes, ", "), undoCommand(key, plan))
	}
	return plan, nil
}

// undoCommand is the knest scale command that returns every group plan changes to its
// previous size.
func undoCommand(key client.ObjectKey, plan scale.Plan) string {
	cmd := fmt.Sprintf("knest scale %s -n %s", key.Name, key.Namespace)
	for _, ch := range plan.Changes {
		switch {
		case ch.Pool == knestv1.ControlPlanePool:
			cmd += fmt.Sprintf(" --control-plane %d", ch.From)
		case ch.FromAuto != nil:
			cmd += fmt.Sprintf(" --autoscale %s=%d:%d", ch.Pool, ch.FromAuto.MinReplicas, ch.FromAuto.MaxReplicas)
		case ch.ToAuto != nil:
			cmd += fmt.Sprintf(" --autoscale %s=%s --pool %s=%d", ch.Pool, scale.AutoscaleOff, ch.Pool, ch.From)
		default:
			cmd += fmt.Sprintf(" --pool %s=%d", ch.Pool, ch.From)
		}
	}
	return cmd
}

// machines lists the Cluster API Machines of the cluster.
func (c *Client) machines(ctx context.Context, key client.ObjectKey) ([]scale.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := c.c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the machines of cluster %s: %w", key.Name, err)
	}
	out := make([]scale.Machine, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp != nil {
			continue
		}
		out = append(out, scale.MachineFrom(&list.Items[i], key.Name))
	}
	return out, nil
}

// markForDeletion sets Cluster API's delete-machine annotation on the named Machines
// and returns those it added the annotation to.
func (c *Client) markForDeletion(ctx context.Context, namespace string, names []string) ([]string, error) {
	var added []string
	for _, name := range names {
		m := &clusterv1.Machine{}
		if err := c.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
			return added, fmt.Errorf("failed to mark machine %s for removal: %w", name, err)
		}
		if _, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]; ok {
			continue
		}
		orig := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[clusterv1.DeleteMachineAnnotation] = DeleteMachineValue
		if err := c.c.Patch(ctx, m, client.MergeFrom(orig)); err != nil {
			return added, fmt.Errorf("failed to mark machine %s for removal: %w", name, err)
		}
		c.logger.V(1).Info("Marked machine for deletion", "machine", name)
		added = append(added, name)
	}
	return added, nil
}

func (c *Client) unmark(ctx context.Context, namespace string, names []string) error {
	var errs []error
	for _, name := range names {
		m := &clusterv1.Machine{}
		m.Name, m.Namespace = name, namespace
		patch := client.RawPatch("application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, clusterv1.DeleteMachineAnnotation)))
		if err := c.c.Patch(ctx, m, patch); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to remove the delete-machine annotation from machine %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
