// Package tenant holds what knest's controllers share about tenants: whether a
// namespace may hold tenant clusters, and who a tenant cluster is (the identity its
// own API answers with).
package tenant

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// NamespaceNotEnabledError is a NestedCluster in a namespace that is not labelled
// knest.dev/tenants=true: knest creates nothing there.
type NamespaceNotEnabledError struct{ Namespace string }

func (e *NamespaceNotEnabledError) Error() string {
	return knestv1.NamespaceNotEnabledMessage(e.Namespace)
}

// CheckNamespace returns a NamespaceNotEnabledError unless namespace ns is
// labelled knest.dev/tenants=true.
func CheckNamespace(ctx context.Context, c client.Reader, ns string) error {
	n := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return err
	}
	if n.Labels[knestv1.TenantNamespaceLabel] != "true" {
		return &NamespaceNotEnabledError{Namespace: ns}
	}
	return nil
}

// WatchNamespaces makes a controller of NestedClusters reconcile those of a
// namespace whose labels change, so that enabling a namespace resumes them.
func WatchNamespaces(b *builder.Builder, c client.Reader) *builder.Builder {
	return b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &knestv1.NestedClusterList{}
		if err := c.List(ctx, list, client.InNamespace(obj.GetName())); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}), builder.WithPredicates(predicate.LabelChangedPredicate{}))
}
