package controller_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/csi/controller"
)

// The tests in this package run the controller service against a real
// kube-apiserver for the host PVCs; KubeVirt's hot-plug, which needs virt-api,
// virt-controller and virt-handler, is controller.FakeVMs.

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// namespace creates a namespace of the test's own.
func namespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "csi-"}}
	g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// nodeVM is the VM of tenant node name of cluster, as CAPK labels it.
func nodeVM(ns, name, cluster string) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
	}}
}

// newServer returns a controller service of cluster in ns, with a client limited to
// ns whose pods run to success at once (kubeletClient), over vms.
func newServer(t *testing.T, g Gomega, ns, cluster string, vms controller.VMs) *controller.Server {
	t.Helper()
	return newServerWith(t, g, kubeletClient{client.NewNamespacedClient(env.Client, ns)}, ns, cluster, vms)
}

func newServerWith(t *testing.T, g Gomega, c client.Client, ns, cluster string, vms controller.VMs) *controller.Server {
	t.Helper()
	s, err := controller.New(controller.Config{
		Client:      c,
		VMs:         vms,
		Namespace:   ns,
		ClusterName: cluster,
		PrepImage:   prepImage,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

// prepImage stands for the driver's image in the tests' prep pods.
const prepImage = "example.com/knest-csi:test"

// bindingClient binds every PVC it creates at once, as the host's storage would; no
// PersistentVolume controller runs on the test bed, and only a bound claim may grow.
type bindingClient struct{ client.Client }

func (c bindingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = pvc.Spec.Resources.Requests
	return c.Client.Status().Update(ctx, pvc)
}

// kubeletClient runs every pod it creates at once, to success, as the host's
// kubelet runs a disk's prep pod (which writes disk.img and exits 0); no kubelet
// runs on the test bed. The tests of the preparation itself set the pods' status
// themselves.
type kubeletClient struct{ client.Client }

func (c kubeletClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	pod.Status.Phase = corev1.PodSucceeded
	return c.Client.Status().Update(ctx, pod)
}

// expandableClass creates a host StorageClass that allows expansion.
func expandableClass(t *testing.T, g Gomega) string {
	t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{GenerateName: "expandable-"},
		Provisioner:          "example.com/none",
		AllowVolumeExpansion: ptr.To(true),
	}
	g.Expect(env.Client.Create(context.Background(), sc)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	return sc.Name
}
