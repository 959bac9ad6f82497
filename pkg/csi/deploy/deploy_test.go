package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/deploy"
	"github.com/knest-dev/knest/pkg/csi/registration"
)

// goModVersion is the version of module that the tools module in dir requires.
func goModVersion(g Gomega, dir, module string) string {
	data, err := os.ReadFile(filepath.Join("../../../hack/tools/csi", dir, "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return ""
}

// The images the controller renders are the ones the builds make: the driver's tag
// is its version, the sidecars' the versions hack/tools/csi pins, and the node image
// (images/build.sh) and the kind host (hack/kind/up.sh) read the references from
// this package's source.
func TestDefaultImagesAreTheBuiltOnes(t *testing.T) {
	g := NewWithT(t)
	g.Expect(deploy.DefaultImage).To(Equal("knest.local/knest-csi:" + knestcsi.Version))
	g.Expect(deploy.DefaultProvisionerImage).To(Equal("knest.local/csi-provisioner:" +
		goModVersion(g, "provisioner", "github.com/kubernetes-csi/external-provisioner/v5")))
	g.Expect(deploy.DefaultAttacherImage).To(Equal("knest.local/csi-attacher:" +
		goModVersion(g, "attacher", "github.com/kubernetes-csi/external-attacher/v4")))
	for _, script := range []string{"../../../images/build.sh", "../../../hack/kind/up.sh"} {
		data, err := os.ReadFile(script)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Contains(string(data), "pkg/csi/deploy/deploy.go")).To(BeTrue(), "%s reads the image references from pkg/csi/deploy", script)
	}
	src, err := os.ReadFile("deploy.go")
	g.Expect(err).NotTo(HaveOccurred())
	// The form the scripts' sed reads.
	g.Expect(string(src)).To(ContainSubstring("\tDefaultImage            = \"" + deploy.DefaultImage + "\"\n"))
}

func render(t *testing.T, g Gomega) *deploy.Objects {
	t.Helper()
	o, err := deploy.Render(deploy.Input{
		Cluster: "demo", Namespace: "tenants",
		StorageClasses: []deploy.StorageClass{
			{Name: "standard", Default: true, AllowVolumeExpansion: true},
			{Name: "fast", HostClass: "ssd"},
		},
		Labels: map[string]string{"knest.dev/cluster": "demo"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	return o
}

func container(g Gomega, cs []corev1.Container, name string) corev1.Container {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	g.Expect(name).To(BeEmpty(), "no container %s", name)
	return corev1.Container{}
}

func mountNames(c corev1.Container) []string {
	var names []string
	for _, m := range c.VolumeMounts {
		names = append(names, m.Name)
	}
	return names
}

func TestRenderHost(t *testing.T) {
	g := NewWithT(t)
	h := render(t, g).Host
	for _, o := range h.List() {
		g.Expect(o.GetName()).To(Equal("demo-csi-controller"))
		g.Expect(o.GetNamespace()).To(Equal("tenants"))
		g.Expect(o.GetLabels()).To(HaveKeyWithValue("knest.dev/cluster", "demo"))
		g.Expect(o.GetObjectKind().GroupVersionKind().Kind).NotTo(BeEmpty())
	}
	g.Expect(h.RoleBinding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "demo-csi-controller"}))
	g.Expect(h.RoleBinding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "demo-csi-controller", Namespace: "tenants"}}))
	g.Expect(h.RoleBinding.Labels).To(HaveKeyWithValue("knest.dev/tenant-access", "csi"))

	// What the controller service does, and nothing else: no Secrets, no watch, no
	// list but of claims, nothing cluster-wide.
	g.Expect(h.Role.Rules).To(ConsistOf(
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines", "virtualmachineinstances"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/addvolume", "virtualmachineinstances/removevolume"}, Verbs: []string{"update"}},
	))

	d := h.Deployment
	g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("knest.dev/cluster", "demo"))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "knest-csi-controller", "knest.dev/cluster": "demo"}))
	d.Spec.Template.Labels["x"] = "y"
	g.Expect(d.Labels).NotTo(HaveKey("x"), "the pod template's labels are a copy")

	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(h.ServiceAccount.Name))
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.RunAsUser).To(Equal(int64(65532)))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(pod.Containers).To(HaveLen(3))
	for _, c := range pod.Containers {
		g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse(), c.Name)
		g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), c.Name)
		g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"}), c.Name)
		g.Expect(c.Resources.Limits.Memory().IsZero()).To(BeFalse(), c.Name)
	}

	driver := container(g, pod.Containers, "knest-csi")
	g.Expect(driver.Image).To(Equal(deploy.DefaultImage))
	g.Expect(driver.Args).To(Equal([]string{"controller", "--namespace=tenants", "--cluster=demo", "--endpoint=unix:///csi/csi.sock", "--health-address=:9808",
		"--prep-image=" + deploy.DefaultImage, "--tenant-kubeconfig=/etc/knest/tenant/value"}))
	g.Expect(driver.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	// The host token is the driver's alone; the sidecars, which talk to the tenant,
	// get the tenant's kubeconfig and nothing of the host. The driver has the tenant's
	// too, for the nodes' startup taints.
	g.Expect(mountNames(driver)).To(ConsistOf("socket-dir", "host-token", "tenant-kubeconfig"))
	g.Expect(driver.VolumeMounts).To(ContainElement(HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount")))
	for name, image := range map[string]string{"csi-provisioner": deploy.DefaultProvisionerImage, "csi-attacher": deploy.DefaultAttacherImage} {
		c := container(g, pod.Containers, name)
		g.Expect(c.Image).To(Equal(image))
		g.Expect(c.Args).To(ContainElements("--csi-address=/csi/csi.sock", "--kubeconfig=/etc/knest/tenant/value", "--leader-election=false", "--retry-interval-max=30s"))
		g.Expect(mountNames(c)).To(ConsistOf("socket-dir", "tenant-kubeconfig"))
	}
	g.Expect(container(g, pod.Containers, "csi-provisioner").Args).To(ContainElement("--default-fstype=ext4"))
	var secret *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secret = v.Secret
		}
	}
	g.Expect(secret.SecretName).To(Equal("demo-kubeconfig"), "Cluster API's admin kubeconfig of the tenant")
}

func TestRenderTenant(t *testing.T) {
	g := NewWithT(t)
	tn := render(t, g).Tenant
	g.Expect(tn.List()).To(HaveLen(5))

	g.Expect(tn.CSIDriver.Name).To(Equal("csi.knest.dev"))
	g.Expect(*tn.CSIDriver.Spec.AttachRequired).To(BeTrue())
	g.Expect(*tn.CSIDriver.Spec.PodInfoOnMount).To(BeFalse())
	g.Expect(*tn.CSIDriver.Spec.FSGroupPolicy).To(Equal(storagev1.FileFSGroupPolicy))

	ds := tn.DaemonSet
	g.Expect(ds.Namespace).To(Equal("kube-system"))
	g.Expect(ds.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "knest-csi-node"}))
	g.Expect(ds.Spec.Template.Labels).To(HaveKeyWithValue("app.kubernetes.io/name", "knest-csi-node"))
	pod := ds.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(tn.ServiceAccount.Name))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse(), "the node plugin does not talk to the API")
	g.Expect(pod.Tolerations).To(ContainElement(corev1.Toleration{Operator: corev1.TolerationOpExists}))
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal(deploy.DefaultImage), "one image for both halves")
	g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	g.Expect(*c.SecurityContext.Privileged).To(BeTrue())
	g.Expect(c.Env).To(ContainElement(HaveField("ValueFrom.FieldRef.FieldPath", "spec.nodeName")))
	g.Expect(c.Args).To(ContainElement("--node-id=$(NODE_NAME)"))

	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		g.Expect(v.HostPath).NotTo(BeNil(), v.Name)
		hostPaths[v.Name] = v.HostPath.Path
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	// Kubelet's directory, with mounts reaching the node; disks; kubelet's registry.
	g.Expect(hostPaths[mounts["/var/lib/kubelet"].Name]).To(Equal("/var/lib/kubelet"))
	g.Expect(*mounts["/var/lib/kubelet"].MountPropagation).To(Equal(corev1.MountPropagationBidirectional))
	g.Expect(hostPaths[mounts["/dev"].Name]).To(Equal("/dev"))
	g.Expect(hostPaths[mounts["/registration"].Name]).To(Equal(registration.RegistryDir))
	g.Expect(c.Args).To(ContainElement("--registration-dir=/registration"))
	// The socket the plugin serves is the one it tells kubelet about.
	g.Expect(c.Args).To(ContainElements("--endpoint=unix:///csi/csi.sock", "--kubelet-endpoint="+registration.Endpoint()))
	g.Expect(hostPaths[mounts["/csi"].Name] + "/csi.sock").To(Equal(registration.Endpoint()))
	// The node's userland for mount, mkfs and resize, read-only.
	for _, p := range []string{"/usr", "/lib", "/lib64", "/bin", "/sbin"} {
		g.Expect(mounts[p].ReadOnly).To(BeTrue(), p)
		g.Expect(hostPaths[mounts[p].Name]).To(Equal(p))
	}

	g.Expect(tn.StorageClasses).To(HaveLen(2))
	std, fast := tn.StorageClasses[0], tn.StorageClasses[1]
	for _, sc := range tn.StorageClasses {
		g.Expect(sc.Provisioner).To(Equal("csi.knest.dev"))
		g.Expect(*sc.ReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimDelete))
		g.Expect(*sc.VolumeBindingMode).To(Equal(storagev1.VolumeBindingWaitForFirstConsumer))
	}
	g.Expect(std.Annotations).To(Equal(map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}))
	g.Expect(std.Parameters).To(BeEmpty(), "the host's default class")
	g.Expect(*std.AllowVolumeExpansion).To(BeTrue())
	g.Expect(fast.Annotations).To(BeEmpty())
	g.Expect(fast.Parameters).To(Equal(map[string]string{"hostStorageClass": "ssd"}))
	g.Expect(*fast.AllowVolumeExpansion).To(BeFalse())
}

func TestRenderRefuses(t *testing.T) {
	for _, tc := range []struct {
		in  deploy.Input
		err string
	}{
		{deploy.Input{Namespace: "ns"}, "needs a cluster name and a namespace"},
		{deploy.Input{Cluster: "demo", Namespace: "ns", StorageClasses: []deploy.StorageClass{{Name: "a", Default: true}, {Name: "b", Default: true}}}, "at most one"},
		{deploy.Input{Cluster: "demo", Namespace: "ns", StorageClasses: []deploy.StorageClass{{Name: "a"}, {Name: "a"}}}, "named twice"},
		{deploy.Input{Cluster: "demo", Namespace: "ns", StorageClasses: []deploy.StorageClass{{Name: "Not_A_Name"}}}, `storage class name "Not_A_Name"`},
	} {
		_, err := deploy.Render(tc.in)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.err)))
	}
}

func TestRenderImages(t *testing.T) {
	g := NewWithT(t)
	o, err := deploy.Render(deploy.Input{Cluster: "demo", Namespace: "ns", KubeconfigSecret: "other",
		Images: deploy.Images{Driver: "r/d:1", Provisioner: "r/p:1", Attacher: "r/a:1"}})
	g.Expect(err).NotTo(HaveOccurred())
	var images []string
	for _, c := range o.Host.Deployment.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	g.Expect(images).To(ConsistOf("r/d:1", "r/p:1", "r/a:1"))
	g.Expect(o.Tenant.DaemonSet.Spec.Template.Spec.Containers[0].Image).To(Equal("r/d:1"))
	g.Expect(o.Host.Deployment.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--prep-image=r/d:1"), "the prep pods run the driver's image")
	g.Expect(o.Tenant.StorageClasses).To(BeEmpty())
	g.Expect(o.List()).To(HaveLen(7))
}
