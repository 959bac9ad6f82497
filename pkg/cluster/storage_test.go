package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// The CSI driver's tenant half reaches the tenant through a ClusterResourceSet that
// reconciles: a class added later is applied too. Without classes, the tenant gets
// one default class of the host's default.
func TestRenderStorage(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.Storage.Deployment.Name).To(Equal("demo-csi-controller"))
	g.Expect(graph.StorageCRS.Spec.Strategy).To(Equal("Reconcile"))
	g.Expect(graph.StorageCRS.Spec.Resources).To(ConsistOf(HaveField("Name", graph.StorageConfigMap.Name)))
	m := graph.StorageConfigMap.Data["csi.yaml"]
	g.Expect(m).To(ContainSubstring("kind: CSIDriver"))
	g.Expect(m).To(ContainSubstring("kind: DaemonSet"))
	g.Expect(m).To(And(ContainSubstring("name: knest\n"), ContainSubstring(`storageclass.kubernetes.io/is-default-class: "true"`)))
	g.Expect(m).NotTo(ContainSubstring("hostStorageClass"), "the host's default class")

	nc := demo()
	nc.Spec.Providers.Storage.Classes = []knestv1.TenantStorageClass{{Name: "fast", HostStorageClassName: "ssd", Default: true}, {Name: "slow", HostStorageClassName: "hdd"}}
	graph, err = cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	m = graph.StorageConfigMap.Data["csi.yaml"]
	g.Expect(m).To(And(ContainSubstring("name: fast\n"), ContainSubstring("name: slow\n"), ContainSubstring("hostStorageClass: ssd"), ContainSubstring("hostStorageClass: hdd")))
	g.Expect(m).NotTo(ContainSubstring("name: knest\n"))
}
