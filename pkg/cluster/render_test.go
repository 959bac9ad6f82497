package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

func demo() *knestv1.NestedCluster {
	nc := &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"},
		Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{
			{Name: "workers"},
			{Name: "gpu", Replicas: ptr(int32(0)), Labels: map[string]knestv1.LabelValue{"gpu": "true", "a": "b"},
				GPUs: []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/A10"}}},
		}},
	}
	cluster.Default(nc)
	return nc
}

func TestRenderNamesAndLabels(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	var kinds []string
	for _, obj := range graph.Objects() {
		kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind)
		g.Expect(obj.GetNamespace()).To(Equal("tenants"))
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "demo"), obj.GetName())
	}
	g.Expect(kinds).To(Equal([]string{
		"NetworkPolicy", "Cluster", "KubevirtCluster", "KubevirtMachineTemplate", "KubeadmControlPlane", "MachineHealthCheck",
		"KubevirtMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment", "MachineHealthCheck",
		"KubevirtMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment", "MachineHealthCheck",
		"ConfigMap", "ClusterResourceSet",
		"ServiceAccount", "Role", "RoleBinding", "Deployment", // the cloud controller manager
		"ServiceAccount", "Role", "RoleBinding", "Deployment", "ConfigMap", "ClusterResourceSet", // the CSI driver
	}))
	g.Expect(graph.Cluster.Name).To(Equal("demo"))
	g.Expect(graph.Cluster.Spec.ClusterNetwork.Pods.CIDRBlocks).To(Equal([]string{knestv1.DefaultPodCIDR}))
	g.Expect(graph.Cluster.Spec.ClusterNetwork.ServiceDomain).To(Equal(knestv1.DefaultDNSDomain))
	g.Expect(graph.ControlPlane.Name).To(Equal("demo-cp"))
	g.Expect(graph.ControlPlane.Spec.MachineTemplate.Spec.InfrastructureRef.Name).To(Equal(graph.ControlPlaneTemplate.Name))
	g.Expect(graph.ControlPlaneTemplate.Name).To(MatchRegexp(`^demo-cp-[0-9a-f]{8}$`))

	gpu := graph.Pools[1]
	g.Expect(gpu.MachineDeployment.Name).To(Equal("demo-gpu"))
	g.Expect(*gpu.MachineDeployment.Spec.Replicas).To(BeZero())
	g.Expect(gpu.MachineDeployment.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(gpu.MachineTemplate.Name))
	g.Expect(gpu.MachineDeployment.Spec.Template.Spec.Bootstrap.ConfigRef.Name).To(Equal(gpu.BootstrapTemplate.Name))
	g.Expect(gpu.MachineDeployment.Spec.Selector.MatchLabels).To(Equal(gpu.MachineDeployment.Spec.Template.Labels))
	args := gpu.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs
	g.Expect(*args[0].Value).To(Equal("a=b,gpu=true"))
	// With the storage provider on, workers join tainted until their CSI plugin
	// registers.
	for _, p := range graph.Pools {
		g.Expect(*p.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.NodeRegistration.Taints).To(ContainElement(startuptaint.Taint), p.Name)
	}
	vmi := gpu.MachineTemplate.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec
	g.Expect(vmi.Domain.Devices.GPUs).To(HaveLen(1))
	g.Expect(vmi.Volumes[0].ContainerDisk.Image).To(Equal("knest/node:" + knestv1.DefaultVersion))
}

func TestRenderTemplateHashes(t *testing.T) {
	g := NewWithT(t)
	base, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	scaled := demo()
	scaled.Spec.Workers[0].Replicas = ptr(int32(5))
	scaled.Spec.ControlPlane.Replicas = 3
	after, err := cluster.Render(scaled, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Pools[0].MachineTemplate.Name).To(Equal(base.Pools[0].MachineTemplate.Name), "scaling must not roll machines")
	g.Expect(after.ControlPlaneTemplate.Name).To(Equal(base.ControlPlaneTemplate.Name))

	bigger := demo()
	bigger.Spec.Workers[0].Memory = ptr(resource.MustParse("8Gi"))
	after, err = cluster.Render(bigger, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Pools[0].MachineTemplate.Name).NotTo(Equal(base.Pools[0].MachineTemplate.Name), "a new VM shape must roll the pool")
	g.Expect(after.Pools[1].MachineTemplate.Name).To(Equal(base.Pools[1].MachineTemplate.Name), "other pools stay")

	tainted := demo()
	tainted.Spec.Workers[0].Labels = map[string]knestv1.LabelValue{"x": "y"}
	after, err = cluster.Render(tainted, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Pools[0].BootstrapTemplate.Name).NotTo(Equal(base.Pools[0].BootstrapTemplate.Name))
	g.Expect(after.Pools[0].MachineTemplate.Name).To(Equal(base.Pools[0].MachineTemplate.Name))
}

func TestRenderOptionsAndVariants(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Network.CNI = knestv1.CNINone
	nc.Spec.APIServer = knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, Host: "api.example.com", CertSANs: []string{"10.0.0.1"}}
	nc.Spec.ControlPlane.RootDisk = knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: ptr(resource.MustParse("20Gi")), StorageClassName: "fast"}
	nc.Spec.ControlPlane.KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:" + knestv1.DefaultVersion}
	nc.Spec.Paused = true
	nc.Spec.Providers.LoadBalancer.Disabled = true
	nc.Spec.Providers.Storage.Disabled = true
	cluster.Default(nc)

	graph, err := cluster.Render(nc, cluster.Options{NodeImageRepository: "registry.local/knest/node", BootstrapCheck: cluster.BootstrapCheckNone})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.CNI).To(BeNil())
	g.Expect(graph.CloudControllerManager).To(BeNil())
	g.Expect(graph.Storage).To(BeNil())
	g.Expect(graph.Pools[0].BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.NodeRegistration.Taints).To(BeNil(), "no CSI plugin to wait for")
	g.Expect(graph.Objects()).To(HaveLen(14))
	g.Expect(*graph.Cluster.Spec.Paused).To(BeTrue())
	g.Expect(string(graph.KubevirtCluster.Spec.ControlPlaneServiceTemplate.Spec.Type)).To(Equal("LoadBalancer"))
	g.Expect(graph.KubevirtCluster.Spec.ControlPlaneEndpoint.Host).To(Equal("api.example.com"))

	cp := graph.ControlPlaneTemplate.Spec.Template.Spec
	g.Expect(cp.BootstrapCheckSpec.CheckStrategy).To(Equal("none"))
	vm := cp.VirtualMachineTemplate.Spec
	g.Expect(vm.DataVolumeTemplates).To(HaveLen(1))
	g.Expect(*vm.DataVolumeTemplates[0].Spec.Source.Registry.URL).To(Equal("docker://registry.local/knest/node:" + knestv1.DefaultVersion))
	g.Expect(*vm.DataVolumeTemplates[0].Spec.Storage.StorageClassName).To(Equal("fast"))
	g.Expect(vm.Template.Spec.Volumes[0].DataVolume.Name).To(Equal("rootdisk"))
	g.Expect(vm.Template.Spec.Domain.Firmware.KernelBoot.Container.KernelPath).To(Equal("/boot/vmlinuz"))
	g.Expect(vm.Template.Spec.Domain.Resources.Requests.Memory().String()).To(Equal("4Gi"))
}

func ptr[T any](v T) *T { return &v }
