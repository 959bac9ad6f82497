package etcddisk_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// A control-plane VM as CAPK creates it from knest's template (its spec and
// metadata copied, named after the machine) is Halted until the etcd-disk
// controller has made its claim and attached it; then it runs. Workers get none.
func TestControlPlaneVMGetsItsEtcdDisk(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "disk")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	// The templates as the NestedCluster controller renders them, with the API
	// server's defaults.
	env.Get(g, nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	asCAPK := func(name string, tmpl *kubevirtv1.VirtualMachineSpec, meta metav1.ObjectMeta) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: meta.Labels, Annotations: meta.Annotations},
			Spec:       *tmpl.DeepCopy(),
		}
	}
	cpTemplate := graph.ControlPlaneTemplate.Spec.Template.Spec.VirtualMachineTemplate
	cp := asCAPK("disk-cp-abcde", &cpTemplate.Spec, cpTemplate.ObjectMeta)
	g.Expect(cp.Spec.RunStrategy).To(HaveValue(Equal(kubevirtv1.RunStrategyHalted)))
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	workerTemplate := graph.Pools[0].MachineTemplate.Spec.Template.Spec.VirtualMachineTemplate
	worker := asCAPK("disk-workers-abcde", &workerTemplate.Spec, workerTemplate.ObjectMeta)
	g.Expect(env.Client.Create(ctx, worker)).To(Succeed())

	pvc := &corev1.PersistentVolumeClaim{}
	g.Eventually(func(g Gomega) {
		env.Get(g, cp)
		g.Expect(cp.Spec.RunStrategy).To(HaveValue(Equal(kubevirtv1.RunStrategyAlways)))
		g.Expect(cp.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", vmtemplate.EtcdDiskName),
			HaveField("PersistentVolumeClaim.ClaimName", "disk-cp-abcde-etcd"))))
		g.Expect(cp.Spec.Template.Spec.Domain.Devices.Disks).To(ContainElement(HaveField("Serial", "etcd")))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "disk-cp-abcde-etcd"}, pvc)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(pvc, cp)).To(BeTrue(), "the claim goes with its VM")
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
	g.Expect(pvc.Spec.StorageClassName).To(BeNil(), "the host's default class")
	g.Expect(pvc.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "disk"))

	env.Get(g, worker)
	g.Expect(vmtemplate.HasEtcdDisk(worker)).To(BeFalse())
	g.Expect(worker.Spec.RunStrategy).To(HaveValue(Equal(kubevirtv1.RunStrategyAlways)))

	// The VM gone (a machine deleted): its claim goes with it.
	g.Expect(env.Client.Delete(ctx, cp)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
	}, timeout, interval).ShouldNot(Succeed())
}
