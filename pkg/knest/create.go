package knest

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

type createOptions struct {
	wait time.Duration
}

// CreateOption configures Create.
type CreateOption func(*createOptions)

// CreateWithWait waits up to timeout for the cluster to be ready; 0 returns once the
// NestedCluster is stored.
func CreateWithWait(timeout time.Duration) CreateOption {
	return func(o *createOptions) { o.wait = timeout }
}

// Create validates nc, creates it on the host cluster and optionally waits for it to be
// ready. Invalid input is reported before anything is sent.
func (c *Client) Create(ctx context.Context, nc *knestv1.NestedCluster, opts ...CreateOption) error {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := Validate(nc); err != nil {
		return err
	}
	if err := c.checkTenantNamespace(ctx, nc); err != nil {
		return err
	}
	status := cli.StatusForLogger(c.logger)
	nc = nc.DeepCopy()
	if err := c.c.Create(ctx, nc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %s already exists in namespace %s; scale or delete it, or pick another name", nc.Name, nc.Namespace)
		}
		if apierrors.IsNotFound(err) {
			return namespaceMissing(nc, err)
		}
		return fmt.Errorf("failed to create cluster %s in namespace %s: %w", nc.Name, nc.Namespace, err)
	}
	status.Success(fmt.Sprintf("cluster %s created in namespace %s", nc.Name, nc.Namespace))
	if o.wait <= 0 {
		return nil
	}
	if err := c.Wait(ctx, client.ObjectKeyFromObject(nc), WaitWithTimeout(o.wait)); err != nil {
		return fmt.Errorf("%w\nNestedCluster %s stays in namespace %s and the controller keeps working on it: follow it with `knest get %s -n %s`, or remove it and everything built for it with `knest delete %s -n %s`",
			err, nc.Name, nc.Namespace, nc.Name, nc.Namespace, nc.Name, nc.Namespace)
	}
	return nil
}

// checkTenantNamespace refuses a namespace the controller would not build in. A user
// who may not read namespaces is not stopped: the cluster's status says it then.
func (c *Client) checkTenantNamespace(ctx context.Context, nc *knestv1.NestedCluster) error {
	name := nc.Namespace
	ns := &corev1.Namespace{}
	switch err := c.c.Get(ctx, client.ObjectKey{Name: name}, ns); {
	case apierrors.IsNotFound(err):
		return namespaceMissing(nc, err)
	case apierrors.IsForbidden(err):
		c.logger.V(1).Info(fmt.Sprintf("Cannot read namespace %s; not checking that it is enabled for tenants", name), "error", err.Error())
		return nil
	case err != nil:
		return fmt.Errorf("failed to read namespace %s: %w", name, err)
	}
	if ns.Labels[knestv1.TenantNamespaceLabel] != "true" {
		return errors.New(knestv1.NamespaceNotEnabledMessage(name))
	}
	return nil
}

func namespaceMissing(nc *knestv1.NestedCluster, err error) error {
	return fmt.Errorf("failed to create cluster %s: namespace %s does not exist; create it first (kubectl create namespace %s) or pick another with -n: %w", nc.Name, nc.Namespace, nc.Namespace, err)
}
