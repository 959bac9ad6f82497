package app_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/internal/freeport"
	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/controller"
	"github.com/knest-dev/knest/pkg/csi/deploy"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

// The controller as pkg/csi/deploy renders it: its container's arguments, and its
// Role, bound to a user of the test bed's that has nothing else. Every call it makes
// of the host's API must get through; KubeVirt's virt-api, which serves the hot-plug
// subresources, does not run on the bed, so a hot-plug gets as far as a 404: past
// authorization.
func TestControllerAsDeployed(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "csi-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	objs, err := deploy.Render(deploy.Input{Cluster: "demo", Namespace: ns.Name})
	g.Expect(err).NotTo(HaveOccurred())

	role := objs.Host.Role.DeepCopy()
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	user := "csi-" + ns.Name
	binding := objs.Host.RoleBinding.DeepCopy()
	binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	dir := socketDir(t)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(env.WriteUserKubeconfig(kubeconfig, user)).To(Succeed())

	var args []string
	for _, c := range objs.Host.Deployment.Spec.Template.Spec.Containers {
		if c.Name == "knest-csi" {
			args = slices.Clone(c.Args)
		}
	}
	g.Expect(args).NotTo(BeEmpty())
	// Here, not in a pod: a socket and a port of the test's, the user's kubeconfig,
	// and the bed's admin kubeconfig standing for the tenant's (later flags win).
	endpoint, health := filepath.Join(dir, "csi.sock"), freeport.Address(t)
	args = append(args, "--endpoint=unix://"+endpoint, "--health-address="+health, "--kubeconfig="+kubeconfig, "--hotplug-wait=0",
		"--tenant-kubeconfig="+env.KubeconfigPath)
	logs, done := run(t, ctx, args...)
	conn := dial(t, endpoint)
	g.Eventually(func() error {
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		return err
	}, 10*time.Second).Should(Succeed(), func() string { return logs.String() })
	g.Eventually(func() (int, error) { return healthz(health) }).Should(Equal(200))
	cc := csi.NewControllerClient(conn)

	// A tenant node that joined with the startup taint loses it once its CSINode
	// lists the driver.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns.Name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{startuptaint.Taint}}}
	g.Expect(env.Client.Create(ctx, node)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: knestcsi.DriverName, NodeID: node.Name}}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		g.Expect(startuptaint.HasTaint(node)).To(BeFalse())
	}, 30*time.Second).Should(Succeed(), func() string { return logs.String() })

	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	vol, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mount})
	g.Expect(err).NotTo(HaveOccurred(), func() string { return logs.String() })
	id := vol.GetVolume().GetVolumeId()
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: id}, pvc)).To(Succeed())
	g.Expect(pvc.Labels).To(HaveKeyWithValue(controller.ClusterLabel, "demo"))
	_, err = cc.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: mount})
	g.Expect(err).NotTo(HaveOccurred())

	// A node of the tenant: its VM, labelled as CAPK labels it.
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "demo-worker-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{}}},
		}},
	}
	g.Expect(env.Client.Create(ctx, vm)).To(Succeed())
	// Running: only a running instance takes a hot-plug.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: vm.Name}, Spec: vm.Spec.Template.Spec}
	g.Expect(env.Client.Create(ctx, vmi)).To(Succeed())
	env.SetVMIStatus(g, vmi, func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.Phase = kubevirtv1.Running })
	publish := &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: vm.Name, VolumeCapability: mount[0]}
	// First the claim's disk.img: a prep pod of the driver's image, which no kubelet
	// runs here; its success the test sets.
	_, err = cc.ControllerPublishVolume(ctx, publish)
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable), "%v", err)
	prep := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: controller.PrepPodName(id)}, prep)).To(Succeed())
	g.Expect(prep.Spec.Containers[0].Image).To(Equal(deploy.DefaultImage), "--prep-image, as rendered")
	prep.Status.Phase = corev1.PodSucceeded
	g.Expect(env.Client.Status().Update(ctx, prep)).To(Succeed())
	// Then the hot-plug; the prep pod is deleted and the claim marked.
	_, err = cc.ControllerPublishVolume(ctx, publish)
	g.Expect(status.Code(err)).To(Equal(codes.Internal))
	g.Expect(err.Error()).To(ContainSubstring("the server could not find the requested resource"), "authorized, and no virt-api")
	g.Expect(strings.ToLower(err.Error())).NotTo(ContainSubstring("forbidden"))
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(prep), &corev1.Pod{})
	}).Should(MatchError(ContainSubstring("not found")))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: id}, pvc)).To(Succeed())
	g.Expect(pvc.Annotations).To(HaveKey(controller.DiskImageAnnotation))
	// Listed (the Role lets it list claims), marked but plugged into no instance.
	list, err := cc.ListVolumes(ctx, &csi.ListVolumesRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.GetEntries()).To(HaveLen(1))
	g.Expect(list.GetEntries()[0].GetVolume().GetVolumeId()).To(Equal(id))
	g.Expect(list.GetEntries()[0].GetStatus().GetPublishedNodeIds()).To(BeEmpty())
	// Marked as published before the hot-plug: a delete waits for the unpublish,
	// which finds the volume not in the instance and clears the mark.
	_, err = cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))
	_, err = cc.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: vm.Name})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: id}, &corev1.PersistentVolumeClaim{})
	}).Should(MatchError(ContainSubstring("not found")))

	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
}
