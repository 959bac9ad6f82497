package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// stop returns, without an error from the manager, also when called as soon as the
// manager was started (it waits for the controllers to start first).
func TestRunManagerStopsAManagerJustStarted(t *testing.T) {
	for range 5 {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme:     env.Scheme,
			Metrics:    metricsserver.Options{BindAddress: "0"},
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
			Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{}, nil
			})); err != nil {
			t.Fatal(err)
		}
		RunManager(t, mgr)()
	}
}
