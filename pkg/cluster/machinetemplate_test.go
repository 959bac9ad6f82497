package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

func TestRenderBootsTheDefaultImageByItsKernel(t *testing.T) {
	g := NewWithT(t)
	firmware := func(tmpl *capkv1.KubevirtMachineTemplate) *kubevirtv1.Firmware {
		return tmpl.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Firmware
	}
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kb := firmware(graph.ControlPlaneTemplate).KernelBoot
	g.Expect(kb.KernelArgs).To(Equal(knestv1.DefaultKernelArgs))
	g.Expect(*kb.Container).To(Equal(kubevirtv1.KernelBootContainer{
		Image: "knest/node-kernel:" + knestv1.DefaultVersion, KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initrd.img",
	}))

	// A pool on an image of its own boots it as it is; so does every pool when the
	// controller is told the default images have a bootloader.
	nc := demo()
	nc.Spec.Workers[0].Image = "quay.io/capk/ubuntu-2404-container-disk:v1.34.3"
	graph, err = cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(firmware(graph.Pools[0].MachineTemplate)).To(BeNil())
	g.Expect(firmware(graph.Pools[1].MachineTemplate)).NotTo(BeNil())
	graph, err = cluster.Render(demo(), cluster.Options{NodeKernelRepository: cluster.NoKernelBoot})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(firmware(graph.ControlPlaneTemplate)).To(BeNil())
}
