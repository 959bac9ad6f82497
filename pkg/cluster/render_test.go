package cluster_test

import (
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

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
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	g.Expect(kcs.ClusterConfiguration.APIServer.CertSANs).To(Equal([]string{"10.0.0.1", "api.example.com"}))
	g.Expect(kcs.ClusterConfiguration.ControllerManager.ExtraArgs).To(ContainElement(bootstrapv1.Arg{Name: "leader-elect-renew-deadline", Value: ptr("45s")}))
	// etcd on a disk of its own, its quota within it (2Gi by default).
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
	g.Expect(kcs.ClusterConfiguration.Scheduler.ExtraArgs).To(Equal(kcs.ClusterConfiguration.ControllerManager.ExtraArgs))
	g.Expect(*kcs.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds).To(Equal(int32(600)))
	g.Expect(*kcs.InitConfiguration.Timeouts.KubernetesAPICallSeconds).To(Equal(int32(300)))
	g.Expect(*kcs.JoinConfiguration.Timeouts.EtcdAPICallSeconds).To(Equal(int32(600)), "a joining control plane's etcd member needs time to sync")
	// The probe patches (probes_test.go), the bootstrap resume script (resume_test.go)
	// and the etcd disk's.
	g.Expect(kcs.Files).To(HaveLen(6))
	g.Expect(kcs.PostKubeadmCommands).To(Equal([]string{"/usr/local/sbin/knest-resume-bootstrap init"}))
	g.Expect(kcs.Files).To(ContainElement(HaveField("Path", "/usr/local/sbin/knest-resume-bootstrap")))
	for _, p := range graph.Pools {
		ws := p.BootstrapTemplate.Spec.Template.Spec
		g.Expect(ws.PostKubeadmCommands).To(Equal([]string{"/usr/local/sbin/knest-resume-bootstrap join"}), p.Name)
		g.Expect(ws.Files).To(ConsistOf(HaveField("Path", "/usr/local/sbin/knest-resume-bootstrap")), p.Name)
	}

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

func TestFlannelManifestUsesPodCIDRAndPort(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Network.PodCIDR = "10.200.0.0/16"
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	manifest := graph.CNIConfigMap.Data["flannel.yaml"]
	g.Expect(manifest).To(ContainSubstring(`"Network":"10.200.0.0/16"`))
	g.Expect(manifest).To(ContainSubstring(`"Port":8473`))
	g.Expect(manifest).To(ContainSubstring(cluster.FlannelImage))
	var ds map[string]any
	docs := splitDocs(manifest)
	g.Expect(docs).To(HaveLen(6))
	g.Expect(yaml.Unmarshal([]byte(docs[5]), &ds)).To(Succeed())
	g.Expect(ds["kind"]).To(Equal("DaemonSet"))
}

func TestDefaultIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	a := demo()
	b := a.DeepCopy()
	cluster.Default(b)
	g.Expect(b).To(Equal(a))
}

func splitDocs(s string) []string {
	var out []string
	for _, d := range regexpDocs.Split(s, -1) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

var regexpDocs = regexp.MustCompile(`(?m)^---\n`)

func ptr[T any](v T) *T { return &v }

func TestHealthCheckAlwaysAllowsOneRemediation(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Workers = []knestv1.WorkerPool{
		{Name: "one", Replicas: ptr(int32(1))},
		{Name: "ten", Replicas: ptr(int32(10))},
	}
	cluster.Default(nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	allowed := func(hc *clusterv1.MachineHealthCheck) int {
		return hc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.IntValue()
	}
	g.Expect(allowed(graph.ControlPlaneHealthCheck)).To(Equal(1), "a single control-plane node")
	g.Expect(allowed(graph.Pools[0].HealthCheck)).To(Equal(1), "40% of 1 rounds to 0; one is always allowed")
	g.Expect(allowed(graph.Pools[1].HealthCheck)).To(Equal(4), "40% of 10")
}

// A node that is NotReady (joined, CNI not yet running) gets longer than one that
// went silent: under emulation the CNI took more than 5 minutes to start, and each
// replacement began the same wait again.
func TestHealthCheckWaitsLongerForNotReadyThanForSilent(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, hc := range []*clusterv1.MachineHealthCheck{graph.ControlPlaneHealthCheck, graph.Pools[0].HealthCheck} {
		timeouts := map[corev1.ConditionStatus]int32{}
		for _, c := range hc.Spec.Checks.UnhealthyNodeConditions {
			g.Expect(c.Type).To(Equal(corev1.NodeReady))
			timeouts[c.Status] = *c.TimeoutSeconds
		}
		g.Expect(timeouts).To(Equal(map[corev1.ConditionStatus]int32{corev1.ConditionFalse: 900, corev1.ConditionUnknown: 300}), hc.Name)
		g.Expect(*hc.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(1200)), hc.Name)
	}

	// A slower host gives its machines longer to join (knest controller --node-startup-timeout).
	graph, err = cluster.Render(demo(), cluster.Options{NodeStartupTimeout: 40 * time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	for _, hc := range []*clusterv1.MachineHealthCheck{graph.ControlPlaneHealthCheck, graph.Pools[0].HealthCheck} {
		g.Expect(*hc.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(2400)), hc.Name)
	}
}

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

// The control plane names the CoreDNS of its version, so an upgrade moves CoreDNS to
// the image the new nodes have preloaded; a minor without a node image leaves it to
// kubeadm.
func TestRenderCoreDNSFollowsTheVersion(t *testing.T) {
	g := NewWithT(t)
	for version, tag := range map[string]string{"v1.34.4": "v1.12.1", "v1.35.4": "v1.13.1", "v1.36.0": ""} {
		nc := demo()
		nc.Spec.Version = version
		graph, err := cluster.Render(nc, cluster.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(graph.ControlPlane.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag).To(Equal(tag), version)
	}
}

// Every component's resources reach the HostedControlPlane, where pkg/hosted fills
// in its defaults.
func TestRenderHostedControlPlaneCarriesResources(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
	mem := func(s string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(s)}}
	}
	nc.Spec.ControlPlane.Hosted = &knestv1.HostedControlPlaneSpec{
		Resources:          mem("1Gi"),
		ControllerManager:  knestv1.HostedComponentSpec{Resources: mem("128Mi")},
		Scheduler:          knestv1.HostedComponentSpec{Resources: mem("64Mi")},
		KonnectivityServer: knestv1.HostedComponentSpec{Resources: mem("32Mi")},
		Etcd:               knestv1.HostedComponentSpec{Resources: mem("256Mi")},
	}
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := graph.HostedControlPlane.Spec
	g.Expect(s.Resources).To(Equal(mem("1Gi")))
	g.Expect(s.ControllerManager.Resources).To(Equal(mem("128Mi")))
	g.Expect(s.Scheduler.Resources).To(Equal(mem("64Mi")))
	g.Expect(s.KonnectivityServer.Resources).To(Equal(mem("32Mi")))
	g.Expect(s.Etcd.Resources).To(Equal(mem("256Mi")))

	// A copy: changing the HostedControlPlane leaves the NestedCluster as it was.
	s.Etcd.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	g.Expect(nc.Spec.ControlPlane.Hosted.Etcd.Resources).To(Equal(mem("256Mi")))
}

func TestRenderAutoscaledPool(t *testing.T) {
	for _, tt := range []struct {
		name string
		pool knestv1.WorkerPool
		want map[string]string
		// absent are annotations the pool must not carry.
		absent []string
	}{{
		name: "plain, scaling from zero",
		pool: knestv1.WorkerPool{Name: "workers", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 2}},
		want: map[string]string{
			clusterv1.AutoscalerMinSizeAnnotation: "0",
			clusterv1.AutoscalerMaxSizeAnnotation: "2",
			cluster.CapacityCPUAnnotation:         "2",
			cluster.CapacityMemoryAnnotation:      "4Gi",
		},
		absent: []string{cluster.CapacityGPUCountAnnotation, cluster.CapacityGPUTypeAnnotation, cluster.CapacityLabelsAnnotation,
			cluster.CapacityTaintsAnnotation, cluster.CapacityEphemeralDiskAnnotation, cluster.CapacityMaxPodsAnnotation},
	}, {
		name: "GPUs, labels and taints",
		pool: knestv1.WorkerPool{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 8},
			MachineSpec: knestv1.MachineSpec{CPU: 16, Memory: ptr(resource.MustParse("64Gi")),
				RootDisk: knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: ptr(resource.MustParse("100Gi"))}},
			Labels: map[string]knestv1.LabelValue{"example.com/gpu": "a10", "tier": ""},
			Taints: []knestv1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}},
			GPUs:   []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}, {Name: "gpu2", DeviceName: "nvidia.com/GA102GL_A10"}},
		},
		want: map[string]string{
			clusterv1.AutoscalerMinSizeAnnotation:   "1",
			clusterv1.AutoscalerMaxSizeAnnotation:   "8",
			cluster.CapacityCPUAnnotation:           "16",
			cluster.CapacityMemoryAnnotation:        "64Gi",
			cluster.CapacityEphemeralDiskAnnotation: "100Gi",
			cluster.CapacityGPUCountAnnotation:      "2",
			cluster.CapacityGPUTypeAnnotation:       "nvidia.com/gpu",
			cluster.CapacityLabelsAnnotation:        "example.com/gpu=a10,tier=",
			cluster.CapacityTaintsAnnotation:        "example.com/gpu=true:NoSchedule,dedicated:NoExecute",
		},
	}, {
		name: "GPUs of two vendors",
		pool: knestv1.WorkerPool{Name: "mixed", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 1},
			GPUs: []knestv1.DeviceSpec{{Name: "a", DeviceName: "nvidia.com/A10"}, {Name: "b", DeviceName: "amd.com/MI210"}}},
		want:   map[string]string{cluster.CapacityGPUCountAnnotation: "2"},
		absent: []string{cluster.CapacityGPUTypeAnnotation},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"},
				Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{tt.pool}}}
			cluster.Default(nc)
			g.Expect(nc.Spec.Workers[0].Replicas).To(BeNil(), "an autoscaled pool is not given replicas by defaulting")
			graph, err := cluster.Render(nc, cluster.Options{})
			g.Expect(err).NotTo(HaveOccurred())
			md := graph.Pools[0].MachineDeployment
			g.Expect(md.Spec.Replicas).To(BeNil(), "knest must not set (and so own) an autoscaled pool's replicas")
			for k, v := range tt.want {
				g.Expect(md.Annotations).To(HaveKeyWithValue(k, v))
			}
			for _, k := range tt.absent {
				g.Expect(md.Annotations).NotTo(HaveKey(k))
			}
			// Values the autoscaler parses as quantities must parse.
			for _, k := range []string{cluster.CapacityCPUAnnotation, cluster.CapacityMemoryAnnotation, cluster.CapacityEphemeralDiskAnnotation} {
				if v, ok := md.Annotations[k]; ok {
					_, err := resource.ParseQuantity(v)
					g.Expect(err).NotTo(HaveOccurred(), k)
				}
			}
			hc := graph.Pools[0].HealthCheck
			g.Expect(hc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.IntValue()).To(Equal(max(1, int(tt.pool.Autoscaling.MaxReplicas)*2/5)),
				"remediation is sized for the most nodes the pool can have")
		})
	}
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
