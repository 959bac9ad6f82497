//go:build e2e

// Package capi_test runs knest's controller with the real Cluster API reconcilers —
// CAPI core, CABPK, KCP and CAPK as released, webhooks and conversion included —
// against the integration test bed, without KubeVirt: VirtualMachine objects are
// created but nothing runs them. It proves that the graph knest renders is one Cluster
// API accepts and acts on, up to the VM, and that deletion leaves nothing behind.
//
// It needs the provider managers (`make providers`) and runs with `make e2e-capi`
// (build tag e2e), not with `make test`.
package capi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/e2e/kubevirt"
	"github.com/knest-dev/knest/e2e/providers"
	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
)

var (
	env   *testenv.Env
	kv    *kubevirt.KubeVirt
	provs *providers.Providers
)

// envLogDir names a directory that keeps the managers' logs and the objects the test
// inspected; by default they are printed on failure only.
const envLogDir = "KNEST_E2E_LOG_DIR"

// Generous: four managers, kube-apiserver and etcd share two busy cores.
// testToolImage is the image backup Jobs are given; no kubelet runs them here.
const testToolImage = "knest.local/knest:test"

const (
	timeout  = 5 * time.Minute
	interval = time.Second
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	var err error
	if env, err = testenv.Start(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: failed to start test environment: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "ERROR: failed to stop test environment: %v\n", err)
		}
	}()
	bedStarted := time.Now()
	// KubeVirt's webhooks first: every VirtualMachine CAPK creates goes through them.
	if kv, err = kubevirt.Start(context.Background(), env, kubevirt.Options{
		LogDir: os.Getenv(envLogDir), Configuration: kubevirtConfiguration(),
	}); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: failed to start KubeVirt: %v\n", err)
		return 1
	}
	defer func() {
		if err := kv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "ERROR: failed to stop KubeVirt: %v\n", err)
		}
	}()
	kvStarted := time.Now()
	if provs, err = providers.Start(context.Background(), env, providers.Options{LogDir: os.Getenv(envLogDir)}); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: failed to start the Cluster API providers: %v\n", err)
		return 1
	}
	defer func() {
		if err := provs.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "ERROR: failed to stop the Cluster API providers: %v\n", err)
		}
	}()
	// knest's controller logs next to the managers'; printed on failure.
	knestLog, err := os.Create(filepath.Join(provs.LogDir, "knest.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
		return 1
	}
	defer knestLog.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(knestLog)))
	fmt.Printf("timing: test bed started in %s, KubeVirt in %s, providers in %s\n",
		bedStarted.Sub(start).Round(100*time.Millisecond), kvStarted.Sub(bedStarted).Round(100*time.Millisecond),
		time.Since(kvStarted).Round(100*time.Millisecond))
	return m.Run()
}

func TestRenderedGraphWithRealClusterAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	t.Cleanup(func() { printLogsOnFailure(t) })
	startController(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-capi-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	nc := &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: knestv1.NestedClusterSpec{
			ControlPlane: knestv1.ControlPlaneSpec{Replicas: 1},
			Workers:      []knestv1.WorkerPool{{Name: "workers", Replicas: ptr.To(int32(1))}},
			APIServer:    knestv1.APIServerSpec{CertSANs: []string{"demo.tenant.example"}},
		},
	}
	created := time.Now()
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	key := client.ObjectKeyFromObject(nc)

	// CAPK: the control-plane Service <cluster>-lb, ClusterIP; CAPI: the Cluster's
	// infrastructure is provisioned and its endpoint is the Service's ClusterIP.
	svc := &corev1.Service{}
	c := &clusterv1.Cluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "demo-lb"}, svc)).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, c)).To(Succeed())
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue(), "Cluster status: %+v", c.Status)
	}, timeout, interval).Should(Succeed())
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
	g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Port", int32(6443))))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("cluster.x-k8s.io/role", "control-plane"))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "demo"))
	g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal(svc.Spec.ClusterIP))
	g.Expect(c.Spec.ControlPlaneEndpoint.Port).To(Equal(int32(6443)))
	t.Logf("timing: infrastructure provisioned %s after create", time.Since(created).Round(time.Second))

	// The Cluster owns what it references (since v1.13 as a plain owner, the
	// controller only with a topology); the NestedCluster co-owns them.
	g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
	for _, obj := range []client.Object{
		&capkv1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "demo"}},
		&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: cluster.ControlPlaneName("demo")}},
	} {
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(obj.GetOwnerReferences()).To(ContainElement(HaveField("UID", c.UID)), "%T %s owners: %+v", obj, obj.GetName(), obj.GetOwnerReferences())
			g.Expect(obj.GetOwnerReferences()).To(ContainElement(HaveField("UID", nc.UID)))
		}, timeout, interval).Should(Succeed())
	}

	// KCP: the first control-plane Machine.
	machine := &clusterv1.Machine{}
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns.Name),
			client.MatchingLabels{clusterv1.MachineControlPlaneLabel: ""})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1))
		*machine = machines.Items[0]
		g.Expect(machine.Spec.Bootstrap.DataSecretName).NotTo(BeNil(), "Machine %s has no bootstrap data yet", machine.Name)
	}, timeout, interval).Should(Succeed())
	g.Expect(machine.Spec.Version).To(Equal(knestv1.DefaultVersion))
	g.Expect(machine.Labels).To(HaveKeyWithValue(knestv1.PoolNameLabel, knestv1.ControlPlanePool))

	// CABPK: the bootstrap data is a cloud-config running kubeadm init with knest's
	// CRI socket and SANs.
	bootstrap := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: *machine.Spec.Bootstrap.DataSecretName}, bootstrap)).To(Succeed())
	data := string(bootstrap.Data["value"])
	g.Expect(string(bootstrap.Data["format"])).To(Equal("cloud-config"))
	g.Expect(data).To(HavePrefix("## template: jinja\n#cloud-config"))
	g.Expect(data).To(ContainSubstring("kubeadm init"))
	g.Expect(data).To(ContainSubstring("criSocket: unix:///var/run/containerd/containerd.sock"))
	g.Expect(data).To(ContainSubstring("demo.tenant.example"))
	g.Expect(data).To(ContainSubstring("podSubnet: " + knestv1.DefaultPodCIDR))
	g.Expect(data).To(ContainSubstring("serviceSubnet: " + knestv1.DefaultServiceCIDR))
	g.Expect(data).To(ContainSubstring("dnsDomain: " + knestv1.DefaultDNSDomain))
	g.Expect(data).To(ContainSubstring("controlPlaneEndpoint: " + svc.Spec.ClusterIP + ":6443"))

	// CAPK: the VirtualMachine, named after the KubevirtMachine, from knest's template.
	vm := &kubevirtv1.VirtualMachine{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: machine.Spec.InfrastructureRef.Name}, vm)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	t.Logf("timing: control-plane VirtualMachine created %s after create", time.Since(created).Round(time.Second))
	g.Expect(vm.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/role", "control-plane"))
	g.Expect(vm.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "demo"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(knestv1.ClusterNameLabel, "demo"))
	// CAPK made it Halted, as knest's template says; knest's etcd-disk controller
	// attaches its claim and starts it, and CAPK leaves that alone.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vm), vm)).To(Succeed())
		g.Expect(vm.Spec.RunStrategy).To(HaveValue(Equal(kubevirtv1.RunStrategyAlways)))
		g.Expect(vm.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", vm.Name+"-etcd")))
	}, timeout, interval).Should(Succeed())
	tmpl := vm.Spec.Template
	g.Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/role", "control-plane"))
	g.Expect(tmpl.Spec.Domain.Devices.Disks).To(ContainElement(And(
		HaveField("Name", "rootdisk"),
		HaveField("DiskDevice.Disk.Bus", kubevirtv1.DiskBusVirtio),
	)))
	g.Expect(tmpl.Spec.Volumes).To(ContainElement(And(
		HaveField("Name", "rootdisk"),
		HaveField("VolumeSource.ContainerDisk.Image", knestv1.DefaultNodeImageRepository+":"+knestv1.DefaultVersion),
	)))
	g.Expect(tmpl.Spec.Volumes).To(ContainElement(
		HaveField("VolumeSource.CloudInitConfigDrive.UserDataSecretRef.Name", *machine.Spec.Bootstrap.DataSecretName+"-userdata"),
	))
	keep(t, "vm.yaml", vm)
	keep(t, "bootstrap-data", data)
	userdata := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: *machine.Spec.Bootstrap.DataSecretName + "-userdata"}, userdata)).To(Succeed())
	// With a #cloud-config, CAPK adds its SSH user (used by checkStrategy ssh).
	keep(t, "userdata", string(userdata.Data["userdata"]))
	g.Expect(string(userdata.Data["userdata"])).To(And(ContainSubstring("kubeadm init"), ContainSubstring("name: capk")))

	// KubeVirt: virt-api admitted CAPK's VM (the test would not get here otherwise);
	// virt-controller starts it as a VMI and a virt-launcher pod.
	pod := launcherPod(ctx, g, ns.Name, vm.Name)
	keep(t, "virt-launcher.yaml", pod)
	checkLauncherPod(ctx, g, pod, "demo", nc.Spec.ControlPlane.MachineSpec, nil)
	t.Logf("timing: control-plane virt-launcher pod created %s after create", time.Since(created).Round(time.Second))

	// knest: the NestedCluster reports the endpoint and the infrastructure.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
		g.Expect(nc.Status.Endpoint).To(Equal("https://" + svc.Spec.ClusterIP + ":6443"))
		g.Expect(conditions.IsTrue(nc, knestv1.InfrastructureReadyCondition)).To(BeTrue(), "conditions: %+v", nc.Status.Conditions)
	}, timeout, interval).Should(Succeed())

	// Nothing runs the VM, so nothing goes further. The worker pool waits for the
	// control plane.
	md := &clusterv1.MachineDeployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: cluster.PoolName("demo", "workers")}, md)).To(Succeed())
	g.Expect(md.Spec.Replicas).To(HaveValue(Equal(int32(1))))
	g.Expect(provs.Err()).NotTo(HaveOccurred())

	// Delete: Cluster API deletes the machines, CAPK the VM and the Service, and the
	// NestedCluster goes once the Cluster is gone.
	deleting := time.Now()
	g.Expect(env.Client.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, key, &knestv1.NestedCluster{})
	}, timeout, interval).Should(Satisfy(apierrors.IsNotFound))
	t.Logf("timing: NestedCluster deleted %s after delete", time.Since(deleting).Round(time.Second))
	g.Eventually(func(g Gomega) {
		g.Expect(leftovers(ctx, ns.Name)).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
	t.Logf("timing: namespace empty %s after delete", time.Since(deleting).Round(time.Second))
	g.Expect(provs.Err()).NotTo(HaveOccurred())
}

// printLogsOnFailure prints the managers', KubeVirt's and knest's logs if t failed.
func printLogsOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	provs.WriteLogs(os.Stderr, 200)
	kv.WriteLogs(os.Stderr, 100)
	if b, err := os.ReadFile(filepath.Join(provs.LogDir, "knest.log")); err == nil {
		fmt.Fprintf(os.Stderr, "===== knest =====\n%s\n", b)
	}
}

// leftovers lists what is left in namespace of everything a NestedCluster leads to.
func leftovers(ctx context.Context, namespace string) []string {
	var left []string
	for _, list := range []client.ObjectList{
		&knestv1.NestedClusterList{},
		&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachineSetList{},
		&clusterv1.MachineDeploymentList{}, &clusterv1.MachineHealthCheckList{},
		&controlplanev1.KubeadmControlPlaneList{},
		&bootstrapv1.KubeadmConfigList{}, &bootstrapv1.KubeadmConfigTemplateList{},
		&capkv1.KubevirtClusterList{}, &capkv1.KubevirtMachineList{}, &capkv1.KubevirtMachineTemplateList{},
		&addonsv1.ClusterResourceSetList{}, &addonsv1.ClusterResourceSetBindingList{},
		&kubevirtv1.VirtualMachineList{}, &kubevirtv1.VirtualMachineInstanceList{},
		&corev1.SecretList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.PodList{},
		&corev1.PersistentVolumeClaimList{}, &hcpv1.HostedControlPlaneList{},
		&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &batchv1.JobList{}, &networkingv1.NetworkPolicyList{},
	} {
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			left = append(left, fmt.Sprintf("%T: %v", list, err))
			continue
		}
		items, _ := meta.ExtractList(list)
		for _, item := range items {
			obj := item.(client.Object)
			kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
			left = append(left, kind+" "+obj.GetName())
		}
	}
	return left
}

// keep writes what the test saw to $KNEST_E2E_LOG_DIR/name, if set.
func keep(t *testing.T, name string, content any) {
	dir := os.Getenv(envLogDir)
	if dir == "" {
		return
	}
	b, ok := content.(string)
	if !ok {
		y, err := yaml.Marshal(content)
		if err != nil {
			t.Errorf("failed to write %s: %v", name, err)
			return
		}
		b = string(y)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
		t.Errorf("failed to write %s: %v", name, err)
	}
}

// startController runs knest's controller in this process until the test ends.
func startController(t *testing.T) {
	t.Helper()
	mgr, err := manager.New(env.Config, manager.Options{Render: cluster.Options{BootstrapCheck: cluster.BootstrapCheckNone}, ToolImage: testToolImage})
	if err != nil {
		t.Fatalf("failed to create manager: %v", err)
	}
	testenv.RunManager(t, mgr)
}
