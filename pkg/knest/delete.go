package knest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

type deleteOptions struct {
	wait           time.Duration
	ignoreNotFound bool
}

// DeleteOption configures Delete.
type DeleteOption func(*deleteOptions)

// DeleteWithWait waits up to timeout (for all the clusters together) until each is
// gone; 0 returns once deletion was requested.
func DeleteWithWait(timeout time.Duration) DeleteOption {
	return func(o *deleteOptions) { o.wait = timeout }
}

// DeleteIgnoreNotFound treats a cluster that does not exist as deleted.
func DeleteIgnoreNotFound(ignore bool) DeleteOption {
	return func(o *deleteOptions) { o.ignoreNotFound = ignore }
}

// Delete deletes the named NestedClusters of namespace and optionally waits until they
// are gone. It asks for every deletion first, then waits, so clusters are torn down in
// parallel. It returns every error it met.
func (c *Client) Delete(ctx context.Context, namespace string, names []string, opts ...DeleteOption) error {
	var o deleteOptions
	for _, opt := range opts {
		opt(&o)
	}
	status := cli.StatusForLogger(c.logger)
	var errs []error
	var pending []string
	for _, name := range names {
		key := client.ObjectKey{Namespace: namespace, Name: name}
		nc := &knestv1.NestedCluster{}
		nc.Name, nc.Namespace = name, namespace
		if err := c.c.Delete(ctx, nc); err != nil {
			err = notFoundOr(err, key, "failed to delete cluster %s in namespace %s")
			var nf *NotFoundError
			if errors.As(err, &nf) && o.ignoreNotFound {
				continue
			}
			errs = append(errs, err)
			continue
		}
		status.Success(fmt.Sprintf("deletion of cluster %s requested", name))
		pending = append(pending, name)
	}
	if o.wait > 0 && len(pending) > 0 {
		// One deadline for all: the clusters are torn down in parallel.
		ctx, cancel := context.WithTimeoutCause(ctx, o.wait, errWaitTimeout)
		defer cancel()
		for _, name := range pending {
			key := client.ObjectKey{Namespace: namespace, Name: name}
			if err := c.WaitForDeletion(ctx, key, WaitWithTimeout(o.wait)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
