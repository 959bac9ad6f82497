package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	infrav1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// env is started once for the package; each test works in its own namespace.
var env *Env

func TestMain(m *testing.M) {
	start := time.Now()
	var err error
	env, err = Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: failed to start test environment: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("test environment started in %s\n", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: failed to stop test environment: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(t.Name()) + "-"}}
	g.Expect(env.Client.Create(t.Context(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

func TestCRDsEstablished(t *testing.T) {
	g := NewWithT(t)
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(env.Client.List(t.Context(), crds)).To(Succeed())

	// Names and labels only, so that a failure prints something readable.
	var names []string
	labels := map[string]map[string]string{}
	for _, crd := range crds.Items {
		names = append(names, crd.Name)
		labels[crd.Name] = crd.Labels
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		g.Expect(established).To(BeTrue(), "CRD %s is not Established", crd.Name)
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "CRD %s", crd.Name)
	}
	for _, name := range []string{
		"clusters.cluster.x-k8s.io",
		"machinedeployments.cluster.x-k8s.io",
		"machinehealthchecks.cluster.x-k8s.io",
		"clusterresourcesets.addons.cluster.x-k8s.io",
		"kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
		"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
		"kubevirtclusters.infrastructure.cluster.x-k8s.io",
		"kubevirtmachinetemplates.infrastructure.cluster.x-k8s.io",
		"virtualmachines.kubevirt.io",
		"virtualmachineinstances.kubevirt.io",
		"nestedclusters.knest.dev",
	} {
		g.Expect(names).To(ContainElement(name))
	}
	// The contract labels that CAPI reads to choose a provider's API version.
	g.Expect(labels["kubevirtclusters.infrastructure.cluster.x-k8s.io"]).To(
		HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1alpha1"))
	g.Expect(labels["kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"]).To(
		HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1beta2"))
}

func TestObjectsAcceptedBySchemas(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)

	kvCluster := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, kvCluster)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtCluster", Name: kvCluster.Name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: ns},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceMemory: resource.MustParse("2Gi"),
						}},
						Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{
							Name:       "root",
							DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}},
						}}},
					},
					Volumes: []kubevirtv1.Volume{{
						Name: "root",
						VolumeSource: kubevirtv1.VolumeSource{
							ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "example.com/node:v1.34.3"},
						},
					}},
				},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, vm)).To(Succeed())

	// The schema is enforced, not just present: a wrongly typed field is rejected.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": "bad", "namespace": ns},
		"spec":       map[string]any{"runStrategy": int64(42), "template": map[string]any{}},
	}}
	err := env.Client.Create(ctx, bad)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
}

func TestGarbageCollection(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)

	owner := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtCluster", Name: "dependent",
		}},
	}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	dependent := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster",
			Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
		}},
	}}
	g.Expect(env.Client.Create(ctx, dependent)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &infrav1.KubevirtCluster{})
	}, 30*time.Second, 200*time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
}

func TestWriteKubeconfig(t *testing.T) {
	g := NewWithT(t)
	path := t.TempDir() + "/kubeconfig"
	g.Expect(env.WriteKubeconfig(path)).To(Succeed())

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.List(t.Context(), &clusterv1.ClusterList{})).To(Succeed())
}

func TestWriteUserKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	path := t.TempDir() + "/kubeconfig"
	const user = "system:serviceaccount:other:reader"
	g.Expect(env.WriteUserKubeconfig(path, user, "system:serviceaccounts")).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// Not an admin: RBAC decides, by user name or group.
	g.Expect(c.List(t.Context(), &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden))
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts"}},
	})).To(Succeed())
	g.Eventually(func() error {
		return c.List(t.Context(), &corev1.ConfigMapList{}, client.InNamespace(ns))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(c.List(t.Context(), &corev1.SecretList{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden))
}

func TestStartFailsWithoutTestBed(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvTestBin, "")
	_, err := Start(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring("make testbin")))
}
