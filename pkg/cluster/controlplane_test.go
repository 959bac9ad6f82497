package cluster_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// The KubeadmControlPlane's kubeadm configuration: the endpoint's host among the API
// server's certificate names, and the longer leader elections, etcd timings and
// kubeadm timeouts an oversubscribed host needs.
func TestRenderControlPlaneKubeadmConfig(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.APIServer = knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, Host: "api.example.com", CertSANs: []string{"10.0.0.1"}}
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	g.Expect(kcs.ClusterConfiguration.APIServer.CertSANs).To(Equal([]string{"10.0.0.1", "api.example.com"}))
	g.Expect(kcs.ClusterConfiguration.ControllerManager.ExtraArgs).To(ContainElement(bootstrapv1.Arg{Name: "leader-elect-renew-deadline", Value: ptr("45s")}))
	g.Expect(kcs.ClusterConfiguration.Scheduler.ExtraArgs).To(Equal(kcs.ClusterConfiguration.ControllerManager.ExtraArgs))
	// With the etcd disk's quota (etcddisk_test.go).
	g.Expect(kcs.ClusterConfiguration.Etcd.Local.ExtraArgs).To(ContainElements(
		bootstrapv1.Arg{Name: "heartbeat-interval", Value: ptr("500")}, bootstrapv1.Arg{Name: "election-timeout", Value: ptr("10000")}))
	g.Expect(*kcs.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds).To(Equal(int32(600)))
	g.Expect(*kcs.InitConfiguration.Timeouts.KubernetesAPICallSeconds).To(Equal(int32(300)))
	g.Expect(*kcs.JoinConfiguration.Timeouts.EtcdAPICallSeconds).To(Equal(int32(600)), "a joining control plane's etcd member needs time to sync")
	// The probe patches (probes_test.go), the bootstrap resume script
	// (resumebootstrap_test.go) and the etcd disk's (etcddisk_test.go).
	g.Expect(kcs.Files).To(HaveLen(6))
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

// On a slow host every kubeadm timeout, those kubeadm defaults included, of the
// control plane and of the pools grows by the host's slowdown, and so do the default
// time a node may take to join, the kubelet's deadline for container runtime calls
// and its cAdvisor's housekeeping interval; at hardware speed the pools'
// configuration leaves kubeadm's timeouts and the kubelet's alone, so it rolls no
// machine.
func TestRenderTimeoutsFollowTheHost(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{HostSlowdown: 3})
	g.Expect(err).NotTo(HaveOccurred())
	want := bootstrapv1.Timeouts{
		ControlPlaneComponentHealthCheckSeconds: ptr(int32(1800)),
		KubeletHealthCheckSeconds:               ptr(int32(720)),
		KubernetesAPICallSeconds:                ptr(int32(900)),
		EtcdAPICallSeconds:                      ptr(int32(1800)),
		TLSBootstrapSeconds:                     ptr(int32(900)),
		DiscoverySeconds:                        ptr(int32(900)),
	}
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	g.Expect(kcs.InitConfiguration.Timeouts).To(Equal(want))
	g.Expect(kcs.JoinConfiguration.Timeouts).To(Equal(want))
	for _, p := range graph.Pools {
		g.Expect(p.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.Timeouts).To(Equal(bootstrapv1.Timeouts{
			ControlPlaneComponentHealthCheckSeconds: ptr(int32(720)),
			KubeletHealthCheckSeconds:               ptr(int32(720)),
			KubernetesAPICallSeconds:                ptr(int32(180)),
			EtcdAPICallSeconds:                      ptr(int32(360)),
			TLSBootstrapSeconds:                     ptr(int32(900)),
			DiscoverySeconds:                        ptr(int32(900)),
		}), p.Name)
		g.Expect(*p.HealthCheck.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(3600)), p.Name)
		g.Expect(p.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(ContainElements(
			bootstrapv1.Arg{Name: "runtime-request-timeout", Value: ptr("6m0s")},
			bootstrapv1.Arg{Name: "housekeeping-interval", Value: ptr("30s")}), p.Name)
	}
	g.Expect(kcs.InitConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
		{Name: "runtime-request-timeout", Value: ptr("6m0s")},
		{Name: "housekeeping-interval", Value: ptr("30s")},
	}))
	g.Expect(kcs.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal(kcs.InitConfiguration.NodeRegistration.KubeletExtraArgs))
	// An explicit startup time is kept as it is.
	graph, err = cluster.Render(demo(), cluster.Options{HostSlowdown: 3, NodeStartupTimeout: 40 * time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*graph.ControlPlaneHealthCheck.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(2400)))

	graph, err = cluster.Render(demo(), cluster.Options{HostSlowdown: 1})
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range graph.Pools {
		g.Expect(p.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.Timeouts).To(BeZero(), p.Name)
		g.Expect(p.BootstrapTemplate.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).NotTo(
			ContainElement(HaveField("Name", BeElementOf("runtime-request-timeout", "housekeeping-interval"))), p.Name)
	}
	g.Expect(graph.ControlPlane.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.KubeletExtraArgs).To(BeEmpty())
	g.Expect(graph.ControlPlane.Spec.KubeadmConfigSpec.InitConfiguration.Timeouts.KubeletHealthCheckSeconds).To(BeNil())
}
