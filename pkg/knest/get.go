package knest

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Get returns one NestedCluster.
func (c *Client) Get(ctx context.Context, key client.ObjectKey) (*knestv1.NestedCluster, error) {
	nc := &knestv1.NestedCluster{}
	if err := c.c.Get(ctx, key, nc); err != nil {
		return nil, notFoundOr(err, key, "failed to get cluster %s in namespace %s")
	}
	return nc, nil
}

// List returns the NestedClusters of namespace, or of every namespace when namespace
// is empty, sorted by namespace and name.
func (c *Client) List(ctx context.Context, namespace string) ([]knestv1.NestedCluster, error) {
	list := &knestv1.NestedClusterList{}
	if err := c.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		where := "namespace " + namespace
		if namespace == "" {
			where = "all namespaces"
		}
		return nil, fmt.Errorf("failed to list clusters in %s: %w", where, err)
	}
	slices.SortFunc(list.Items, func(a, b knestv1.NestedCluster) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return list.Items, nil
}

// notFoundOr turns NotFound into a plain message and wraps other errors with format.
func notFoundOr(err error, key client.ObjectKey, format string) error {
	if apierrors.IsNotFound(err) {
		return &NotFoundError{Key: key}
	}
	return fmt.Errorf(format+": %w", key.Name, key.Namespace, err)
}

// NotFoundError says a NestedCluster does not exist.
type NotFoundError struct {
	Key client.ObjectKey
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("cluster %s not found in namespace %s", e.Key.Name, e.Key.Namespace)
}
