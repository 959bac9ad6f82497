//go:build e2e

package capi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	capkcontext "sigs.k8s.io/cluster-api-provider-kubevirt/pkg/context"
	capkkubevirt "sigs.k8s.io/cluster-api-provider-kubevirt/pkg/kubevirt"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // CAPK's MachineContext is v1beta1
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// What the test's host admin enables in the KubeVirt CR: host devices are an alpha
// feature gate in KubeVirt v1.7 (GPUs are GA) and must be permitted by name.
const (
	gpuDevice  = "nvidia.com/GA102GL_A10"
	hostDevice = "intel.com/qat"
)

func kubevirtConfiguration() kubevirtv1.KubeVirtConfiguration {
	return kubevirtv1.KubeVirtConfiguration{
		DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{FeatureGates: []string{"HostDevices"}},
		PermittedHostDevices: &kubevirtv1.PermittedHostDevices{PciHostDevices: []kubevirtv1.PciHostDevice{
			{PCIVendorSelector: "10DE:2236", ResourceName: gpuDevice},
			{PCIVendorSelector: "8086:4940", ResourceName: hostDevice},
		}},
	}
}

// TestVirtualMachineVariantsThroughKubeVirt renders one pool of every VM shape knest
// produces, builds each pool's VirtualMachine with CAPK's own code from the
// KubevirtMachineTemplate knest applied (no worker VM is created otherwise: CABPK
// waits for a control plane that never boots here), and sends it through KubeVirt's
// webhooks and virt-controller. It checks what a host scheduler and a host admin
// see on the virt-launcher pod.
func TestVirtualMachineVariantsThroughKubeVirt(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	t.Cleanup(func() { printLogsOnFailure(t) })
	startController(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-kubevirt-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	zero := ptr.To(int32(0))
	gib := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }
	nc := &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "shapes", Namespace: ns.Name},
		Spec: knestv1.NestedClusterSpec{
			ControlPlane: knestv1.ControlPlaneSpec{Replicas: 1},
			Workers: []knestv1.WorkerPool{
				// The default: containerDisk root, the kernel booted from the kernel-boot image.
				{Name: "plain", Replicas: zero, MachineSpec: knestv1.MachineSpec{CPU: 3, Memory: gib(6)}},
				// An image of its own: containerDisk, its own bootloader.
				{Name: "ownimage", Replicas: zero, MachineSpec: knestv1.MachineSpec{Image: "registry.example/node:custom"}},
				{Name: "datavolume", Replicas: zero, MachineSpec: knestv1.MachineSpec{
					RootDisk: knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: gib(30), StorageClassName: "fast"},
				}},
				{
					Name: "gpu", Replicas: zero,
					MachineSpec: knestv1.MachineSpec{CPU: 4, Memory: gib(16)},
					Labels:      map[string]knestv1.LabelValue{"accelerator": "a10"},
					Taints:      []knestv1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
					GPUs:        []knestv1.DeviceSpec{{Name: "gpu0", DeviceName: gpuDevice}},
				},
				{Name: "hostdev", Replicas: zero, HostDevices: []knestv1.DeviceSpec{{Name: "qat0", DeviceName: hostDevice}}},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())

	kc := &capkv1.KubevirtCluster{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: nc.Name}, kc)
	}, timeout, interval).Should(Succeed())
	capiCluster := &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: nc.Name}}

	for _, pool := range nc.Spec.Workers {
		t.Run(pool.Name, func(t *testing.T) {
			g := NewWithT(t)
			md := &clusterv1.MachineDeployment{}
			tmpl := &capkv1.KubevirtMachineTemplate{}
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: cluster.PoolName(nc.Name, pool.Name)}, md)).To(Succeed())
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: md.Spec.Template.Spec.InfrastructureRef.Name}, tmpl)).To(Succeed())
			}, timeout, interval).Should(Succeed())

			// What CAPI and CAPK would make of one machine of the pool: a KubevirtMachine
			// cloned from the template, its Machine, and CAPK's VirtualMachine for it.
			name := fmt.Sprintf("%s-%s-0", nc.Name, pool.Name)
			machine := &clusterv1beta1.Machine{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Labels: md.Spec.Template.Labels},
				Spec: clusterv1beta1.MachineSpec{
					ClusterName: nc.Name,
					Bootstrap:   clusterv1beta1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
				},
			}
			km := &capkv1.KubevirtMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
				Spec:       *tmpl.Spec.Template.Spec.DeepCopy(),
			}
			mctx := &capkcontext.MachineContext{
				Context: ctx, Cluster: capiCluster, Machine: machine,
				KubevirtCluster: kc, KubevirtMachine: km, Logger: testr.New(t),
			}
			m, err := capkkubevirt.NewMachine(mctx, env.Client, ns.Name, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Create(ctx)).To(Succeed(), "KubeVirt refused the VirtualMachine of pool %s", pool.Name)

			vm := &kubevirtv1.VirtualMachine{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, vm)).To(Succeed())
			keep(t, "vm-"+pool.Name+".yaml", vm)
			if pool.RootDisk.Type == knestv1.RootDiskDataVolume {
				// virt-controller creates the DataVolume first, through CDI, which this
				// test bed does not have: the VM is admitted, its VMI waits.
				g.Expect(vm.Spec.DataVolumeTemplates).To(HaveLen(1))
				g.Expect(vm.Spec.DataVolumeTemplates[0].Name).To(Equal(name + "-" + "rootdisk"))
				return
			}
			pod := launcherPod(ctx, g, ns.Name, name)
			keep(t, "virt-launcher-"+pool.Name+".yaml", pod)
			checkLauncherPod(ctx, g, pod, nc.Name, pool.MachineSpec, append(pool.GPUs, pool.HostDevices...))
		})
	}

	// The webhooks are live: a VM the CRD schema accepts but KubeVirt refuses.
	bad := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "no-such-volume"},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "missing"}}}},
			}},
		},
	}
	err := env.Client.Create(ctx, bad)
	g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err)).To(BeTrue(), "want KubeVirt's webhook to refuse, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("admission webhook"))
	g.Expect(kv.Err()).NotTo(HaveOccurred())
}

// launcherPod waits for virt-controller's VMI of the VM and the virt-launcher pod of
// that VMI.
func launcherPod(ctx context.Context, g Gomega, namespace, vmName string) *corev1.Pod {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	pod := &corev1.Pod{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: vmName}, vmi)).To(Succeed())
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(namespace),
			client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		*pod = pods.Items[0]
	}, timeout, interval).Should(Succeed())
	return pod
}

// checkLauncherPod checks the virt-launcher pod of a pool's VM: what the host
// scheduler places it by, and the labels knest's isolation policy selects on.
func checkLauncherPod(ctx context.Context, g Gomega, pod *corev1.Pod, clusterName string, shape knestv1.MachineSpec, devices []knestv1.DeviceSpec) {
	cpu := shape.CPU
	if cpu == 0 {
		cpu = knestv1.DefaultCPU
	}
	memory := resource.MustParse(knestv1.DefaultMemory)
	if shape.Memory != nil {
		memory = *shape.Memory
	}
	var compute *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "compute" {
			compute = &pod.Spec.Containers[i]
		}
	}
	g.Expect(compute).NotTo(BeNil(), "virt-launcher pod %s has no compute container", pod.Name)
	requests := compute.Resources.Requests
	// The whole VM is requested: every vCPU, and the guest's memory plus KubeVirt's
	// overhead for qemu and virt-launcher.
	g.Expect(requests.Cpu().Cmp(*resource.NewQuantity(int64(cpu), resource.DecimalSI))).To(Equal(0),
		"pod %s: CPU request %s, want %d", pod.Name, requests.Cpu(), cpu)
	g.Expect(requests.Memory().Cmp(memory)).To(Equal(1),
		"pod %s: memory request %s, want more than the guest's %s", pod.Name, requests.Memory(), memory.String())
	for _, d := range devices {
		name := corev1.ResourceName(d.DeviceName)
		g.Expect(compute.Resources.Limits).To(HaveKeyWithValue(name, resource.MustParse("1")),
			"pod %s: the device %s is not a resource of the pod: %v", pod.Name, d.DeviceName, compute.Resources)
	}
	// knest's isolation NetworkPolicy selects its VMs' pods by these labels.
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cluster.IsolationName(clusterName)}, policy)).To(Succeed())
	selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labels.Set(pod.Labels))).To(BeTrue(),
		"isolation policy selector %s does not select virt-launcher pod labels %v", selector, pod.Labels)
	// No kubelet runs here: the pod is created, never scheduled.
	g.Expect(pod.Spec.NodeName).To(BeEmpty())
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
}
