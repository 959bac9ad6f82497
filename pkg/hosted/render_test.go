package hosted

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func input() Input {
	return Input{
		HCP: &hcpv1.HostedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Name: "demo-cp", Namespace: "team-a"},
			Spec: hcpv1.HostedControlPlaneSpec{Version: "v1.35.4", Replicas: ptr.To[int32](1),
				Network: hcpv1.NetworkSpec{PodCIDR: "10.243.0.0/16", ServiceCIDR: "10.95.0.0/16", DNSDomain: "tenant.local"}},
		},
		Cluster: "demo", ServiceIP: "10.96.7.8",
	}
}

// podSpecs are the pod templates of every workload rendered for in.
func podSpecs(t *testing.T, in Input) map[string]corev1.PodSpec {
	t.Helper()
	sts, _, err := in.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]corev1.PodSpec{
		"API server":              in.Deployment("hash").Spec.Template.Spec,
		"kubeadm":                 in.Job("hash").Spec.Template.Spec,
		"etcd":                    sts.Spec.Template.Spec,
		"etcd member replacement": in.EtcdReplaceJob(2, "uid", "knest:test").Spec.Template.Spec,
	}
}

// The API server pod, etcd and the kubeadm Job run to the restricted Pod Security
// Standard, their keys in memory.
func TestPodsAreRestricted(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.EtcdStorageClass = ptr.To("fast")
	for name, spec := range podSpecs(t, in) {
		g.Expect(spec.SecurityContext).NotTo(BeNil(), name)
		g.Expect(spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), name)
		g.Expect(spec.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(nonRootUser)), name)
		g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), name)
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			g.Expect(c.SecurityContext).NotTo(BeNil(), c.Name)
			g.Expect(c.SecurityContext.RunAsUser).To(BeNil(), "%s: the pod's user, not its own", c.Name)
			g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
			g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty(), c.Name)
			g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		}
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.Name != "konnectivity" && v.Name != "data" { // a socket; etcd's data
				g.Expect(v.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory), "%s: %s", name, v.Name)
			}
		}
	}
}

// Every container has a memory limit, no lower than its request (the host refuses
// a pod otherwise), and no CPU limit unless the spec gives one.
func TestEveryContainerHasAMemoryLimit(t *testing.T) {
	for name, mutate := range map[string]func(*Input){
		"defaults":               func(*Input) {},
		"three and three":        func(in *Input) { in.HCP.Spec.Replicas = ptr.To[int32](3); in.HCP.Spec.Etcd.Members = 3 },
		"requests only, in spec": func(in *Input) { in.HCP.Spec.Etcd.Resources = requests("1", "256Mi") },
		"limit only, in spec": func(in *Input) {
			in.HCP.Spec.Scheduler.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := input()
			in.EtcdStorageClass = ptr.To("")
			mutate(&in)
			for pod, spec := range podSpecs(t, in) {
				for _, c := range append(spec.InitContainers, spec.Containers...) {
					r := c.Resources
					g.Expect(r.Limits).To(HaveKey(corev1.ResourceMemory), "%s: %s", pod, c.Name)
					g.Expect(r.Requests).To(HaveKey(corev1.ResourceMemory), "%s: %s", pod, c.Name)
					g.Expect(r.Requests).To(HaveKey(corev1.ResourceCPU), "%s: %s", pod, c.Name)
					g.Expect(r.Limits).NotTo(HaveKey(corev1.ResourceCPU), "%s: %s", pod, c.Name)
					g.Expect(r.Limits.Memory().Cmp(*r.Requests.Memory())).To(BeNumerically(">=", 0), "%s: %s", pod, c.Name)
				}
			}
		})
	}
}

// Each component's resources in the spec replace its defaults, value by value.
func TestResourcesFromTheSpec(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.EtcdStorageClass = ptr.To("")
	s := &in.HCP.Spec
	s.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}, // above the default limit
	}
	s.ControllerManager.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	s.Scheduler.Resources = requests("30m", "48Mi")
	s.KonnectivityServer.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	s.Etcd.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	got := map[string]corev1.ResourceRequirements{}
	for _, spec := range podSpecs(t, in) {
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			got[c.Name] = c.Resources
		}
	}
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	want := map[string]corev1.ResourceRequirements{
		// A request above the default limit drops it.
		"kube-apiserver": {Requests: list("cpu", apiServerCPU, "memory", "2Gi")},
		"kube-controller-manager": {Requests: list("cpu", "200m", "memory", controllerManagerMemory),
			Limits: list("cpu", "1", "memory", "1Gi")},
		"kube-scheduler": {Requests: list("cpu", "30m", "memory", "48Mi"), Limits: list("memory", schedulerMemoryLimit)},
		// A limit below the default request makes the request.
		"konnectivity-server": {Requests: list("cpu", konnectivityCPU, "memory", konnectivityMemory), Limits: list("memory", "64Mi")},
		"etcd":                {Requests: list("cpu", etcdCPU, "memory", "1Gi"), Limits: list("memory", "2Gi")},
		"certs":               kubeadmDefaults,
		"kubeadm":             kubeadmDefaults,
		// A short Job's own, not the spec's.
		"replace-member": {Requests: list("cpu", "10m", "memory", "32Mi"), Limits: list("memory", "128Mi")},
	}
	g.Expect(got).To(HaveLen(len(want)))
	for name, w := range want {
		g.Expect(equality.Semantic.DeepEqual(got[name], w)).To(BeTrue(), "%s: got %v, want %v", name, got[name], w)
	}

	s.KonnectivityServer.Resources.Limits = list("memory", "8Mi")
	for _, c := range in.Deployment("hash").Spec.Template.Spec.Containers {
		if c.Name == "konnectivity-server" {
			g.Expect(c.Resources.Requests.Memory().String()).To(Equal("8Mi"), "a default request above the given limit becomes the limit")
		}
	}
	g.Expect(in.HCP.Spec.KonnectivityServer.Resources.Requests).To(BeNil(), "the spec is left as it was")
}

// The controller caches only ConfigMaps labelled as knest's (internal/manager):
// one without the label is never found, so its apply writes on every reconcile and
// never checks who owns it.
func TestConfigMapsCarryKnestsLabel(t *testing.T) {
	g := NewWithT(t)
	kubeadm, err := input().KubeadmConfig()
	g.Expect(err).NotTo(HaveOccurred())
	agent, _, err := input().Konnectivity()
	g.Expect(err).NotTo(HaveOccurred())
	for _, cm := range []*corev1.ConfigMap{kubeadm, agent, input().EtcdJoin()} {
		g.Expect(cm.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "demo"), cm.Name)
	}
}

// The API server and etcd have StartupSeconds, times the host's slowdown, before
// their liveness probes may restart them; after that a stuck one is restarted within
// 80 s either way.
func TestStartupFollowsTheHost(t *testing.T) {
	g := NewWithT(t)
	budget := func(p *corev1.Probe) int32 { return p.PeriodSeconds * p.FailureThreshold }
	for _, slowdown := range []int{0, 1, 3} {
		in := input()
		in.HostSlowdown = slowdown
		for name, spec := range podSpecs(t, in) {
			if name == "kubeadm" || name == "etcd member replacement" {
				continue // Jobs
			}
			c := spec.Containers[0]
			g.Expect(c.StartupProbe).NotTo(BeNil(), name)
			g.Expect(budget(c.StartupProbe)).To(Equal(int32(StartupSeconds*max(slowdown, 1))), "%s at slowdown %d", name, slowdown)
			g.Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/livez"), name)
			g.Expect(c.StartupProbe.ProbeHandler).To(Equal(c.LivenessProbe.ProbeHandler), name)
			g.Expect(c.LivenessProbe.InitialDelaySeconds).To(BeZero(), "%s: the startup probe gates liveness", name)
			g.Expect(budget(c.LivenessProbe)).To(Equal(int32(80)), name)
		}
	}
}

// The API servers and the etcd members each prefer host nodes the others of their kind
// are not on, so draining or losing one host node takes one of each at most; the
// kubeadm Job is not spread.
func TestReplicasSpreadAcrossHostNodes(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.HCP.Spec.Replicas = ptr.To[int32](3)
	in.HCP.Spec.Etcd.Members = 3
	sts, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	for name, tmpl := range map[string]corev1.PodTemplateSpec{
		"API server": in.Deployment("hash").Spec.Template,
		"etcd":       sts.Spec.Template,
	} {
		g.Expect(tmpl.Spec.Affinity).NotTo(BeNil(), name)
		terms := tmpl.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		g.Expect(terms).To(HaveLen(1), name)
		g.Expect(terms[0].PodAffinityTerm.TopologyKey).To(Equal(corev1.LabelHostname), name)
		g.Expect(terms[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(tmpl.Labels), "%s: its own replicas, not the other component's", name)
	}
	g.Expect(in.Job("hash").Spec.Template.Spec.Affinity).To(BeNil())
}
