package testenv

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	knestv1alpha1 "github.com/knest-dev/knest/api/v1alpha1"
)

// StartManager runs a manager of the bed with the controllers setup adds, as
// RunManager does: until the returned stop is called, and at the latest when the
// test ends. opts are completed with the bed's Scheme and no metrics server. setup
// is given controller options that skip the name check: each test builds a manager
// of its own, and controller-runtime would refuse a controller's name twice.
func (e *Env) StartManager(t testing.TB, opts ctrl.Options, setup func(ctrl.Manager, controller.Options) error) (stop func()) {
	t.Helper()
	opts.Scheme = e.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	if err := setup(mgr, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatalf("failed to set up the controller: %v", err)
	}
	return RunManager(t, mgr)
}

// CreateTenantNamespace creates a namespace labelled as a knest tenant's, its name
// generated from prefix, and returns the name.
func CreateTenantNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: map[string]string{knestv1alpha1.TenantNamespaceLabel: "true"}}}
	gomega.NewWithT(t).Expect(c.Create(t.Context(), ns)).To(gomega.Succeed())
	return ns.Name
}

// NestedCluster is NestedCluster name in ns with one worker pool, workers, and the
// API server's defaults for the rest; it is not created.
func NestedCluster(ns, name string) *knestv1alpha1.NestedCluster {
	return &knestv1alpha1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: knestv1alpha1.NestedClusterSpec{Workers: []knestv1alpha1.WorkerPool{
			{Name: "workers"},
		}},
	}
}

// Get reads obj fresh from the API server.
func (e *Env) Get(g gomega.Gomega, obj client.Object) {
	g.Expect(e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(gomega.Succeed())
}

// SetVMIStatus changes a VMI's status as virt-handler would.
func (e *Env) SetVMIStatus(g gomega.Gomega, vmi *kubevirtv1.VirtualMachineInstance, mutate func(*kubevirtv1.VirtualMachineInstanceStatus)) {
	ctx := context.Background()
	e.Get(g, vmi)
	mutate(&vmi.Status)
	err := e.Client.Status().Update(ctx, vmi)
	if apierrors.IsNotFound(err) {
		// KubeVirt's VMI has no status subresource: status is part of the object.
		err = e.Client.Update(ctx, vmi)
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
}
