//go:build e2e

// Package kind_test checks, on the kind host cluster of `make e2e`
// (hack/kind/up.sh), the things the tenant suite relies on that real KubeVirt, the
// host's own CNI and the host's set-up decide, each on its own, so that a machine
// that cannot run the whole suite still proves them:
//
//   - knest's node image boots under the real virt-launcher (libvirt and qemu from the
//     images built here, software emulation where the KVM probe failed) to getty on
//     its serial console, with KubeVirt's masquerade binding;
//   - knest's isolation NetworkPolicy, rendered by pkg/cluster, is enforced by the
//     host cluster's enforcer (kube-network-policies), with plain pods carrying the
//     labels of a tenant's VM pods standing in for them;
//   - the host components a tenant's API and machines hang on (MetalLB, the Cluster
//     API managers) have probes that a host full of emulated VMs does not fail.
package kind_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/e2e/internal/probe"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/netpol"
)

const (
	envHostKubeconfig = "KNEST_E2E_HOST_KUBECONFIG"
	envNodeImage      = "KNEST_E2E_NODE_IMAGE"
	envKernelImage    = "KNEST_E2E_KERNEL_IMAGE"
	bootTimeout       = 15 * time.Minute
	poll              = 2 * time.Second
)

type host struct {
	client.Client
	cs *kubernetes.Clientset
}

func newHost(t *testing.T) host {
	t.Helper()
	kc := os.Getenv(envHostKubeconfig)
	if kc == "" {
		t.Fatalf("%s is not set: run make e2e, which brings up the kind host, or source the env file hack/kind/up.sh writes", envHostKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return host{Client: c, cs: kubernetes.NewForConfigOrDie(cfg)}
}

func (h host) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := h.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Delete(context.Background(), ns) })
	return ns.Name
}

func TestNodeImageBootsUnderKubeVirt(t *testing.T) {
	g := NewWithT(t)
	h := newHost(t)
	image, kernel := os.Getenv(envNodeImage), os.Getenv(envKernelImage)
	g.Expect(image).NotTo(BeEmpty(), envNodeImage)
	g.Expect(kernel).NotTo(BeEmpty(), envKernelImage)
	ns := h.namespace(t, "kind-boot-")
	memory := resource.MustParse("1Gi")
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "node", Namespace: ns},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				CPU:       &kubevirtv1.CPU{Cores: 1},
				Memory:    &kubevirtv1.Memory{Guest: &memory},
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: memory}},
				Firmware: &kubevirtv1.Firmware{KernelBoot: &kubevirtv1.KernelBoot{
					KernelArgs: "root=LABEL=knest-root ro console=ttyS0",
					Container: &kubevirtv1.KernelBootContainer{
						Image: kernel, KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initrd.img", ImagePullPolicy: corev1.PullIfNotPresent,
					},
				}},
				Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
					Interfaces: []kubevirtv1.Interface{{
						Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
					}},
					LogSerialConsole: ptr(true),
				},
			},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
			Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
				ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: image, ImagePullPolicy: corev1.PullIfNotPresent},
			}}},
		},
	}
	start := time.Now()
	g.Expect(h.Create(t.Context(), vmi)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(h.Get(t.Context(), client.ObjectKeyFromObject(vmi), vmi)).To(Succeed())
		g.Expect(vmi.Status.Phase).NotTo(Equal(kubevirtv1.Failed), "VMI failed: %+v", vmi.Status.Conditions)
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, bootTimeout, poll).Should(Succeed())
	t.Logf("VMI Running after %s", time.Since(start).Round(time.Second))

	// The serial console, as KubeVirt relays it from the launcher pod.
	var console string
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(h.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		b, err := h.cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "guest-console-log"}).DoRaw(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		console = string(b)
		// getty's banner from /etc/issue, printed right before "login: ": the prompt
		// itself ends with no newline, and the console log relays a line only once
		// it is complete.
		g.Expect(console).To(MatchRegexp(`(?m)^Debian GNU/Linux \S+ \S+ ttyS0`))
	}, bootTimeout, 5*time.Second).Should(Succeed(), "console so far:\n%s", tail(console, 30))
	t.Logf("getty on the serial console %s after create", time.Since(start).Round(time.Second))
}

// TestIsolationByHostCNI applies knest's NetworkPolicy for a cluster "alpha" and
// checks it with connections between plain pods: two "VM" pods of alpha (the labels
// the policy selects) serving 8080 and 6443, and a pod of another namespace.
func TestIsolationByHostCNI(t *testing.T) {
	g := NewWithT(t)
	h := newHost(t)
	tenant, other := h.namespace(t, "kind-tenant-"), h.namespace(t, "kind-other-")

	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: tenant}}
	cluster.Default(nc)
	// As the controller deploys it: VMs resolve through the guest DNS.
	guestDNS := &corev1.Service{}
	g.Expect(h.Get(t.Context(), client.ObjectKey{Namespace: "knest-system", Name: "knest-guest-dns"}, guestDNS)).To(Succeed())
	dns, err := netpol.GuestDNSFromService(guestDNS)
	g.Expect(err).NotTo(HaveOccurred())
	graph, err := cluster.Render(nc, cluster.Options{GuestDNS: dns})
	g.Expect(err).NotTo(HaveOccurred())
	policy := graph.Isolation.DeepCopy()
	policy.OwnerReferences = nil // no NestedCluster object here
	g.Expect(h.Create(t.Context(), policy)).To(Succeed())

	vmLabels := map[string]string{kubevirtv1.AppLabel: "virt-launcher", clusterv1.ClusterNameLabel: "alpha"}
	vm1 := probe.Server(t, h, tenant, "vm-1", vmLabels)
	vm2 := probe.Server(t, h, tenant, "vm-2", vmLabels)
	outsider := probe.Server(t, h, other, "outsider", nil)
	fromOther := probe.Client{Namespace: other}
	fromVM := probe.Client{Namespace: tenant, Labels: vmLabels, Settle: 5 * time.Second}

	// Baseline: the servers answer where nothing is in the way.
	g.Expect(probe.Reaches(t, h, fromOther, outsider, probe.ServerPort)).To(BeTrue(), "a pod reaches a server of its own namespace")
	// Ingress: another namespace reaches the API server port only.
	g.Expect(probe.Reaches(t, h, fromOther, vm1, probe.APIPort)).To(BeTrue(), "another namespace reaches a VM's 6443")
	g.Expect(probe.Connect(t, h, fromOther, vm1, probe.ServerPort)).To(BeFalse(), "another namespace reaches a VM's 8080")
	// The tenant's own VMs reach each other on any port and their resolver, the
	// guest DNS; nothing else on the host's networks, the host's cluster DNS
	// included (its answers name the host's Services).
	g.Expect(probe.Reaches(t, h, fromVM, vm2, probe.ServerPort)).To(BeTrue(), "a VM reaches another VM of its cluster")
	g.Expect(probe.Reaches(t, h, fromVM, dns.Nameserver, 53)).To(BeTrue(), "a VM reaches the guest DNS")
	g.Expect(probe.Connect(t, h, fromVM, kubeDNS(t, h), 53)).To(BeFalse(), "a VM reaches the host's cluster DNS")
	g.Expect(probe.Connect(t, h, fromVM, outsider, probe.ServerPort)).To(BeFalse(), "a VM reaches a pod of another namespace")
}

func kubeDNS(t *testing.T, h host) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := h.Get(t.Context(), client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, svc); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func ptr[T any](v T) *T { return &v }

// TestHostProbesAllowASlowHost checks that the host components a tenant's API and
// machines hang on keep running while emulated VMs fill the host's cores
// (hack/kind/up.sh): MetalLB's speaker, failing its 1-second liveness probe beside two
// emulated workers, was restarted ten times in 50 minutes of a conformance part, each
// time withdrawing the tenant API's address; the Cluster API managers were killed the
// same way mid-upgrade. Each gets probes of 5 s and a minute of liveness failures.
func TestHostProbesAllowASlowHost(t *testing.T) {
	g := NewWithT(t)
	h := newHost(t)
	ctx := t.Context()
	apps := h.cs.AppsV1()
	speaker, err := apps.DaemonSets("metallb-system").Get(ctx, "speaker", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pods := map[string]corev1.PodSpec{"metallb-system/speaker": speaker.Spec.Template.Spec}
	for _, d := range []string{
		"metallb-system/controller",
		"capi-system/capi-controller-manager",
		"capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager",
		"capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager",
		"capk-system/capk-controller-manager",
	} {
		ns, name, _ := strings.Cut(d, "/")
		dep, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		pods[d] = dep.Spec.Template.Spec
	}
	for name, spec := range pods {
		c := spec.Containers[0]
		g.Expect(c.LivenessProbe).NotTo(BeNil(), name)
		g.Expect(c.ReadinessProbe).NotTo(BeNil(), name)
		g.Expect(c.LivenessProbe.TimeoutSeconds).To(BeNumerically(">=", 5), "%s: liveness probe timeout", name)
		g.Expect(c.LivenessProbe.FailureThreshold*c.LivenessProbe.PeriodSeconds).To(BeNumerically(">=", 60), "%s: liveness failures before a restart, in seconds", name)
		g.Expect(c.ReadinessProbe.TimeoutSeconds).To(BeNumerically(">=", 5), "%s: readiness probe timeout", name)
	}
}
