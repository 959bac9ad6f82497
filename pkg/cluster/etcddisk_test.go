package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/knest-dev/knest/pkg/cluster"
)

// A VM control plane keeps etcd on a disk of its own, with etcd's quota within it; an
// ephemeral etcd stays on the root disk.
func TestRenderEtcdDisk(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	// The quota within the disk (2Gi by default).
	g.Expect(kcs.ClusterConfiguration.Etcd.Local.ExtraArgs).To(ConsistOf(
		bootstrapv1.Arg{Name: "heartbeat-interval", Value: ptr("500")}, bootstrapv1.Arg{Name: "election-timeout", Value: ptr("10000")},
		bootstrapv1.Arg{Name: "quota-backend-bytes", Value: ptr("1610612736")}))
	// Mounted by knest's script, not cloud-init's fs_setup, which formats a whole disk
	// on every first boot of an instance (a restarted VM is one).
	g.Expect(kcs.DiskSetup.Filesystems).To(BeEmpty())
	g.Expect(kcs.PreKubeadmCommands).To(ConsistOf("/usr/local/sbin/knest-etcd-disk"))
	g.Expect(kcs.Files).To(ContainElement(And(HaveField("Path", "/usr/local/sbin/knest-etcd-disk"),
		HaveField("Content", And(ContainSubstring("virtio-etcd"), ContainSubstring("blkid"), ContainSubstring("kubeadm-join-config.yaml"))))))
	g.Expect(kcs.InitConfiguration.NodeRegistration.IgnorePreflightErrors).To(ConsistOf("DirAvailable--var-lib-etcd"))
	cpVM := graph.ControlPlaneTemplate.Spec.Template.Spec.VirtualMachineTemplate
	g.Expect(cpVM.ObjectMeta.Annotations).To(HaveKeyWithValue("knest.dev/etcd-disk-size", "2Gi"))
	g.Expect(string(*cpVM.Spec.RunStrategy)).To(Equal("Halted"), "started by the etcd-disk controller once its disk is attached")

	nc := demo()
	nc.Spec.ControlPlane.Etcd.Ephemeral = true
	graph, err = cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kcs = graph.ControlPlane.Spec.KubeadmConfigSpec
	g.Expect(kcs.ClusterConfiguration.Etcd.Local.ExtraArgs).NotTo(ContainElement(HaveField("Name", "quota-backend-bytes")))
	g.Expect(kcs.PreKubeadmCommands).To(BeEmpty())
	g.Expect(kcs.Files).NotTo(ContainElement(HaveField("Path", "/usr/local/sbin/knest-etcd-disk")))
	g.Expect(kcs.InitConfiguration.NodeRegistration.IgnorePreflightErrors).To(BeEmpty())
	g.Expect(graph.ControlPlaneTemplate.Spec.Template.Spec.VirtualMachineTemplate.ObjectMeta.Annotations).NotTo(HaveKey("knest.dev/etcd-disk-size"))
}
