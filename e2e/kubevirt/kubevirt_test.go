//go:build e2e

package kubevirt_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/e2e/kubevirt"
	"github.com/knest-dev/knest/internal/testenv"
)

// TestStartAndStop checks the harness itself: virt-api mutates and admits a
// VirtualMachine, virt-controller makes its VMI and virt-launcher pod.
func TestStartAndStop(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	env, err := testenv.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	kv, err := kubevirt.Start(ctx, env, kubevirt.Options{LogDir: os.Getenv("KNEST_E2E_LOG_DIR")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			kv.WriteLogs(os.Stderr, 100)
		}
		g.Expect(kv.Stop()).To(Succeed())
	})

	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "smoke"},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					Memory:  &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))},
					Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}},
				},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "example/disk:1"},
				}}},
			}},
		},
	}
	g.Expect(env.Client.Create(ctx, vm)).To(Succeed())
	// virt-api's mutating webhook defaults the machine type.
	g.Expect(vm.Spec.Template.Spec.Domain.Machine).NotTo(BeNil())

	g.Eventually(func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace("default"),
			client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Spec.Containers[0].Image).To(Equal(kubevirt.LauncherImage))
	}, 3*time.Minute, time.Second).Should(Succeed())

	// Deleting the VM takes its VMI and pod with it.
	g.Expect(env.Client.Delete(ctx, vm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace("default"))).To(Succeed())
		for _, obj := range []client.Object{&kubevirtv1.VirtualMachineInstance{}, &kubevirtv1.VirtualMachine{}} {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: finalizers %v, %+v; pods %d", obj, vm.Name, obj.GetFinalizers(), obj, len(pods.Items))
		}
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(kv.Err()).NotTo(HaveOccurred())
}
