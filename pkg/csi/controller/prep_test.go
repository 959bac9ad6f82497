package controller_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/csi/controller"
)

// The tests of disk preparation run with no kubelet: the tests set the prep pods'
// status, as the host's kubelet would.

func getPrepPod(g Gomega, ns, id string) *corev1.Pod {
	pod := &corev1.Pod{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controller.PrepPodName(id)}, pod)).To(Succeed())
	return pod
}

func setPodStatus(g Gomega, pod *corev1.Pod, st corev1.PodStatus) {
	pod.Status = st
	g.Expect(env.Client.Status().Update(context.Background(), pod)).To(Succeed())
}

// expectNoPrepPod waits until volume id's prep pod is gone: deleted (a pod no node
// runs goes at once) or never made.
func expectNoPrepPod(g Gomega, ns, id string) {
	g.Eventually(func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controller.PrepPodName(id)}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "no prep pod of %s", id)
}

// TestPublishPreparesDisk: a fresh Filesystem claim is hot-plugged only once its
// disk.img is made. Until its prep pod succeeds, publishing is Unavailable and
// nothing is plugged; then the claim is marked and plugged, and the pod deleted;
// later publishes skip the preparation.
func TestPublishPreparesDisk(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{HostNode: "host-1"}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServerWith(t, g, client.NewNamespacedClient(env.Client, ns), ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()
	pvc := getPVC(g, ns, id)

	for range 2 {
		_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
		g.Expect(status.Code(err)).To(Equal(codes.Unavailable), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("Pending"))
	}
	g.Expect(vms.Adds).To(BeZero(), "no hot-plug before disk.img exists")

	pod := getPrepPod(g, ns, id)
	g.Expect(pod.Labels).To(HaveKeyWithValue(controller.ClusterLabel, "tenant-a"))
	g.Expect(pod.OwnerReferences).To(ConsistOf(HaveField("UID", pvc.UID)))
	spec := pod.Spec
	g.Expect(spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(*spec.SecurityContext.RunAsUser).To(Equal(int64(107)))
	g.Expect(*spec.SecurityContext.RunAsGroup).To(Equal(int64(107)))
	g.Expect(*spec.SecurityContext.FSGroup).To(Equal(int64(107)))
	g.Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(spec.NodeName).To(BeEmpty(), "scheduled, so that a WaitForFirstConsumer claim is provisioned")
	g.Expect(spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(Equal([]corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"host-1"}}},
	}}))
	g.Expect(spec.Volumes).To(ConsistOf(corev1.Volume{Name: "disk", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: id},
	}}))
	g.Expect(spec.Containers).To(HaveLen(1))
	c := spec.Containers[0]
	g.Expect(c.Image).To(Equal(prepImage))
	g.Expect(c.Command).To(Equal([]string{"/knest-csi", "prepare-disk", "--file", "/disk/disk.img", "--size", "1073741824"}))
	g.Expect(c.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: "disk", MountPath: "/disk"}))
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.Resources.Requests.Memory().IsZero()).To(BeFalse())

	setPodStatus(g, pod, corev1.PodStatus{Phase: corev1.PodSucceeded})
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(1))
	g.Expect(getPVC(g, ns, id).Annotations).To(HaveKeyWithValue(controller.DiskImageAnnotation, "1073741824"))
	expectNoPrepPod(g, ns, id)

	// Plugged again, elsewhere: no second preparation (no kubelet would run it).
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
	g.Expect(err).NotTo(HaveOccurred())
	vms.Add(nodeVM(ns, "node-2", "tenant-a"), true)
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(2))
	expectNoPrepPod(g, ns, id)
}

// TestPrepFailed: a failed prep pod is reported, with its reason, and replaced by
// the next call.
func TestPrepFailed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServerWith(t, g, client.NewNamespacedClient(env.Client, ns), ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	pod := getPrepPod(g, ns, id)
	g.Expect(pod.Spec.Affinity).To(BeNil(), "an instance on no known host node")
	setPodStatus(g, pod, corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "prepare-disk", Image: prepImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", Message: "ERROR: failed to size /disk/disk.img: no space left on device\n",
		}},
	}}})

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Internal))
	g.Expect(err.Error()).To(ContainSubstring("exit code 1, Error: ERROR: failed to size /disk/disk.img: no space left on device"))
	expectNoPrepPod(g, ns, id)
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.DiskImageAnnotation))

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	g.Expect(getPrepPod(g, ns, id).UID).NotTo(Equal(pod.UID), "a new pod")
	g.Expect(vms.Adds).To(BeZero())
}

// TestDeleteVolumeRemovesPrepPod: a publish given up before its preparation ended
// leaves a pod, which deleting the volume deletes.
func TestDeleteVolumeRemovesPrepPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServerWith(t, g, client.NewNamespacedClient(env.Client, ns), ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	g.Expect(getPrepPod(g, ns, id).Spec.Affinity).To(BeNil(), "an instance on no known host node")
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
	g.Expect(err).NotTo(HaveOccurred())
	getPrepPod(g, ns, id)

	// Another tenant's delete of the same ID touches neither.
	other := newServerWith(t, g, client.NewNamespacedClient(env.Client, ns), ns, "tenant-b", vms)
	_, err = other.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	g.Expect(err).NotTo(HaveOccurred())
	getPrepPod(g, ns, id)

	_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	g.Expect(err).NotTo(HaveOccurred())
	expectNoPrepPod(g, ns, id)
	g.Expect(vms.Adds).To(BeZero())
}

// TestBlockSkipsPrep: a Block claim is the disk itself; it needs no disk.img and
// no room beyond its capacity.
func TestBlockSkipsPrep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServerWith(t, g, client.NewNamespacedClient(env.Client, ns), ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, map[string]string{controller.ParamHostVolumeMode: "Block"}))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()
	g.Expect(getPVC(g, ns, id).Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("1Gi")))

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(1))
	expectNoPrepPod(g, ns, id)
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.DiskImageAnnotation))
}
