package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// A pool held at an older version gets machines, a node image and a kernel of that
// version; it is never rendered newer than spec.version, which the controller lowers
// while a previous upgrade still rolls.
func TestRenderHeldPoolVersion(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Version = "v1.35.4"
	nc.Spec.Workers[0].Version = "v1.34.4"
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.ControlPlane.Spec.Version).To(Equal("v1.35.4"))
	held, other := graph.Pools[0], graph.Pools[1]
	g.Expect(held.MachineDeployment.Spec.Template.Spec.Version).To(Equal("v1.34.4"))
	g.Expect(other.MachineDeployment.Spec.Template.Spec.Version).To(Equal("v1.35.4"))
	vm := held.MachineTemplate.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec
	g.Expect(vm.Volumes[0].ContainerDisk.Image).To(Equal("knest/node:v1.34.4"))
	g.Expect(vm.Domain.Firmware.KernelBoot.Container.Image).To(Equal("knest/node-kernel:v1.34.4"))
	g.Expect(other.MachineTemplate.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Volumes[0].ContainerDisk.Image).To(Equal("knest/node:v1.35.4"))

	nc.Spec.Version = "v1.34.3" // what the controller renders while v1.34.3 still rolls
	graph, err = cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.Pools[0].MachineDeployment.Spec.Template.Spec.Version).To(Equal("v1.34.3"))
}

func TestRenderPoolReplicas(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"},
		Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{{Name: "unset"}, {Name: "three", Replicas: ptr(int32(3))}}}}
	// As the controller sees a pool the CRD no longer defaults: not run through Default.
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.Pools[0].MachineDeployment.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)), "unset replicas mean 1")
	g.Expect(graph.Pools[1].MachineDeployment.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(graph.Pools[0].MachineDeployment.Annotations).NotTo(HaveKey(clusterv1.AutoscalerMinSizeAnnotation))
}
