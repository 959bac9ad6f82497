package controller_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/controller"
)

var mountRWO = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func createReq(name string, required int64, params map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: required},
		VolumeCapabilities: []*csi.VolumeCapability{mountRWO},
		Parameters:         params,
	}
}

func publishReq(id, node string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: mountRWO}
}

func getPVC(g Gomega, ns, name string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
	return pvc
}

func TestCreateVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	s := newServer(t, g, ns, "tenant-a", &controller.FakeVMs{})

	params := map[string]string{
		controller.ParamHostStorageClass: "fast",
		controller.ParamHostVolumeMode:   "Block",
		"csi.storage.k8s.io/pvc/name":    "data", // csi-provisioner's own
	}
	// 1.5 MiB rounds up to 2 MiB.
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 3<<19, params))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()
	g.Expect(id).To(Equal(controller.VolumeID("tenant-a", "pvc-1")))
	g.Expect(rsp.GetVolume().GetCapacityBytes()).To(Equal(int64(2 << 20)))

	pvc := getPVC(g, ns, id)
	g.Expect(pvc.Labels).To(HaveKeyWithValue(controller.ClusterLabel, "tenant-a"))
	g.Expect(pvc.Annotations).To(HaveKeyWithValue(controller.NameAnnotation, "pvc-1"))
	g.Expect(pvc.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteOnce))
	g.Expect(*pvc.Spec.VolumeMode).To(Equal(corev1.PersistentVolumeBlock))
	g.Expect(*pvc.Spec.StorageClassName).To(Equal("fast"))
	g.Expect(pvc.Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("2Mi")))

	// The same request again: the same volume.
	again, err := s.CreateVolume(ctx, createReq("pvc-1", 3<<19, params))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.GetVolume()).To(Equal(rsp.GetVolume()))

	// The same name with a size the volume does not have.
	_, err = s.CreateVolume(ctx, createReq("pvc-1", 4<<20, params))
	g.Expect(status.Code(err)).To(Equal(codes.AlreadyExists))

	// Defaults: Filesystem, the host's default StorageClass, 1 GiB.
	rsp, err = s.CreateVolume(ctx, createReq("pvc-2", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	pvc = getPVC(g, ns, rsp.GetVolume().GetVolumeId())
	g.Expect(*pvc.Spec.VolumeMode).To(Equal(corev1.PersistentVolumeFilesystem))
	g.Expect(pvc.Spec.StorageClassName).To(BeNil())
	g.Expect(rsp.GetVolume().GetCapacityBytes()).To(Equal(controller.DefaultVolumeSize))
	// Room for disk.img of 1 GiB and the filesystem around it: 1024 MiB * 1.06,
	// rounded up. The capacity is the tenant's, also when asked again.
	g.Expect(pvc.Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("1086Mi")))
	g.Expect(pvc.Annotations).To(HaveKeyWithValue(controller.CapacityAnnotation, "1073741824"))
	again, err = s.CreateVolume(ctx, createReq("pvc-2", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.GetVolume()).To(Equal(rsp.GetVolume()))
	_, err = s.CreateVolume(ctx, createReq("pvc-2", 1086<<20, nil))
	g.Expect(status.Code(err)).To(Equal(codes.AlreadyExists), "the claim's request is not the volume's capacity")

	for name, req := range map[string]*csi.CreateVolumeRequest{
		"unknown parameter": createReq("pvc-3", 0, map[string]string{"hostStorageClas": "typo"}),
		"bad volume mode":   createReq("pvc-3", 0, map[string]string{controller.ParamHostVolumeMode: "block"}),
		"multi-node": {Name: "pvc-3", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: mountRWO.AccessType,
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		}}},
	} {
		_, err := s.CreateVolume(ctx, req)
		g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument), name)
	}
}

// TestCrossTenant: two tenants share a host namespace; neither can reach the
// other's volumes or VMs, nor claims that the driver did not make, by any ID.
func TestCrossTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "a-node", "tenant-a"), true)
	vms.Add(nodeVM(ns, "b-node", "tenant-b"), true)
	a := newServer(t, g, ns, "tenant-a", vms)
	b := newServer(t, g, ns, "tenant-b", vms)

	rsp, err := a.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	aVol := rsp.GetVolume().GetVolumeId()
	// A claim of the host's own, such as a node's root disk.
	rootDisk := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-node-rootdisk"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(ctx, rootDisk)).To(Succeed())

	// The same CSI name in another tenant is another volume.
	rsp, err = b.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.GetVolume().GetVolumeId()).NotTo(Equal(aVol))

	// Volumes that are not the caller's: nothing to publish, validate, unpublish or
	// delete (deleting what is not yours deletes nothing, and succeeds).
	for _, c := range []struct {
		srv  *controller.Server
		id   string
		node string
	}{
		{b, aVol, "b-node"},          // another tenant's volume
		{a, rootDisk.Name, "a-node"}, // a claim the driver did not make
		{b, rootDisk.Name, "b-node"},
		{a, "../" + aVol, "a-node"}, // not a name at all
	} {
		_, err := c.srv.ControllerPublishVolume(ctx, publishReq(c.id, c.node))
		g.Expect(status.Code(err)).To(Equal(codes.NotFound), "publish %s to %s", c.id, c.node)
		_, err = c.srv.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: c.id, VolumeCapabilities: []*csi.VolumeCapability{mountRWO}})
		g.Expect(status.Code(err)).To(Equal(codes.NotFound), "validate %s", c.id)
		_, err = c.srv.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: c.id, NodeId: c.node})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.srv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: c.id})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Its own volume, to nodes that are not its own.
	for _, node := range []string{"b-node", "no-such-node", "a-node/addvolume?x=../"} {
		_, err := a.ControllerPublishVolume(ctx, publishReq(aVol, node))
		g.Expect(status.Code(err)).To(Equal(codes.NotFound), "publish to %s", node)
	}
	g.Expect(vms.Adds).To(BeZero())
	g.Expect(vms.Removes).To(BeZero())
	getPVC(g, ns, aVol)
	getPVC(g, ns, rootDisk.Name)

	// A claim of someone else's under the name a volume would get is not adopted.
	squat := rootDisk.DeepCopy()
	squat.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: controller.VolumeID("tenant-a", "pvc-2")}
	g.Expect(env.Client.Create(ctx, squat)).To(Succeed())
	_, err = a.CreateVolume(ctx, createReq("pvc-2", 0, nil))
	g.Expect(status.Code(err)).To(Equal(codes.AlreadyExists))

	// And its own volume tenant a deletes.
	_, err = a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: aVol})
	g.Expect(err).NotTo(HaveOccurred())
	gone := &corev1.PersistentVolumeClaim{}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: aVol}, gone)
	if err == nil {
		// The PVC protection finalizer (kube-controller-manager) may hold it a moment.
		g.Expect(gone.DeletionTimestamp).NotTo(BeNil())
	} else {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
}

func TestPublish(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	vms.Add(nodeVM(ns, "node-2", "tenant-a"), true)
	s := newServer(t, g, ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	for range 3 {
		pub, err := s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pub.GetPublishContext()).To(Equal(map[string]string{knestcsi.PublishContextSerial: knestcsi.SerialFor(id)}))
	}
	g.Expect(vms.Adds).To(Equal(1))
	vmi, err := vms.GetInstance(ctx, ns, "node-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmi.Spec.Domain.Devices.Disks).To(ConsistOf(kubevirtv1.Disk{
		Name:       id,
		Serial:     knestcsi.SerialFor(id),
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}},
	}))
	g.Expect(vmi.Spec.Volumes).To(ConsistOf(kubevirtv1.Volume{Name: id, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: id},
			Hotpluggable:                      true,
		},
	}}))
	g.Expect(getPVC(g, ns, id).Annotations).To(HaveKeyWithValue(controller.AttachedToAnnotation, "node-1"))

	// One node at a time.
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))
	// Not deleted while published.
	_, err = s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))

	for range 3 {
		_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(vms.Removes).To(Equal(1))
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.AttachedToAnnotation))

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(err).NotTo(HaveOccurred())
	// Unpublishing without a node unpublishes from the one it is on.
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id})
	g.Expect(err).NotTo(HaveOccurred())
	vmi, err = vms.GetInstance(ctx, ns, "node-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmi.Spec.Volumes).To(BeEmpty())
}

// TestPublishInProgress: a hot-plug that KubeVirt has not finished is Unavailable,
// and the next call, once it has, succeeds without a second request.
func TestPublishInProgress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{InProgress: true}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServer(t, g, ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	vms.Finish()
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())

	unpub := &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}
	_, err = s.ControllerUnpublishVolume(ctx, unpub)
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	g.Expect(getPVC(g, ns, id).Annotations).To(HaveKeyWithValue(controller.AttachedToAnnotation, "node-1"))
	vms.Finish()
	_, err = s.ControllerUnpublishVolume(ctx, unpub)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{vms.Adds, vms.Removes}).To(Equal([]int{1, 1}))
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.AttachedToAnnotation))
}

// TestVMReplaced covers the detach paths kubevirt-csi-driver's users found broken:
// the VM recreated under the same name without the volume (publish plugs it
// again), the VM gone (unpublish succeeds, the volume is free again), and a VM that
// does not run (no hot-plug, and no mark, until it does).
func TestVMReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServer(t, g, ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())

	// Recreated: the new VM lacks the volume; publishing again plugs it.
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(2))

	// Gone.
	vms.Delete(ns, "node-1")
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.AttachedToAnnotation))

	// Not running: Unavailable, so that the attacher calls again.
	vms.Add(nodeVM(ns, "node-2", "tenant-a"), false)
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.AttachedToAnnotation))
	g.Expect(vms.Adds).To(Equal(2))
	vms.Add(nodeVM(ns, "node-2", "tenant-a"), true)
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(3))
}

// TestStoppedVMReleasesVolume: a volume published to a VM whose guest has stopped
// (an instance left Failed after its host node restarted or was lost, which KubeVirt
// neither restarts nor deletes) moves to another node, unpublished or not first, and
// the stopped VM keeps no claim on it.
func TestStoppedVMReleasesVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		vms.Add(nodeVM(ns, n, "tenant-a"), true)
	}
	s := newServer(t, g, ns, "tenant-a", vms)
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())

	// The tenant unpublishes from the stopped VM: its Failed instance still lists
	// the volume, which virt-api would not unplug, and its next instance starts
	// without it.
	vms.Fail(ns, "node-1")
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getPVC(g, ns, id).Annotations).NotTo(HaveKey(controller.AttachedToAnnotation))
	g.Expect(vms.Removes).To(BeZero())

	// Published straight to a new node while still marked on a stopped one, whose
	// deletion KubeVirt cannot finish and whose unplug virt-api refuses.
	deleting := nodeVM(ns, "node-2", "tenant-a")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"kubevirt.io/virtualMachineControllerFinalize"}
	vms.Add(deleting, true)
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-2"))
	g.Expect(err).NotTo(HaveOccurred())
	vms.Fail(ns, "node-2")
	s = newServer(t, g, ns, "tenant-a", refusingVMs{vms})
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-3"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getPVC(g, ns, id).Annotations).To(HaveKeyWithValue(controller.AttachedToAnnotation, "node-3"))

	// A running guest keeps it: no second node while it may be writing.
	vms.Restart(ns, "node-1")
	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))
}

// refusingVMs refuses every unplug.
type refusingVMs struct{ *controller.FakeVMs }

func (refusingVMs) RemoveVolume(context.Context, string, string, *kubevirtv1.RemoveVolumeOptions) error {
	return apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstances"), "", errors.New("VMI is not running"))
}

func TestExpandVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	s := newServerWith(t, g, bindingClient{client.NewNamespacedClient(env.Client, ns)}, ns, "tenant-a", &controller.FakeVMs{})
	params := map[string]string{controller.ParamHostStorageClass: expandableClass(t, g)}
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 1<<30, params))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	exp, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 3<<29 + 1}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exp.GetCapacityBytes()).To(Equal(int64(3<<29 + 1<<20)))
	g.Expect(exp.GetNodeExpansionRequired()).To(BeTrue())
	// The claim grows by the filesystem's room too: 1537 MiB * 1.06, rounded up.
	g.Expect(getPVC(g, ns, id).Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("1630Mi")))
	g.Expect(getPVC(g, ns, id).Annotations).To(HaveKeyWithValue(controller.CapacityAnnotation, "1611661312"))

	// Smaller, or a block volume: nothing to do; no filesystem to grow.
	exp, err = s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exp.GetCapacityBytes()).To(Equal(int64(3<<29 + 1<<20)))
	g.Expect(exp.GetNodeExpansionRequired()).To(BeFalse())

	// A claim that is not bound may not grow.
	unbound := newServer(t, g, ns, "tenant-a", &controller.FakeVMs{})
	rsp, err = unbound.CreateVolume(ctx, createReq("pvc-2", 1<<30, params))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = unbound.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: rsp.GetVolume().GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))

	// Nor another tenant's.
	other := newServer(t, g, ns, "tenant-b", &controller.FakeVMs{})
	_, err = other.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 30}})
	g.Expect(status.Code(err)).To(Equal(codes.NotFound))
}

// racingVMs loses every hot-plug race: another call's request gets in first, and
// virt-api refuses this one.
type racingVMs struct{ *controller.FakeVMs }

func (r racingVMs) AddVolume(ctx context.Context, ns, vm string, opts *kubevirtv1.AddVolumeOptions) error {
	if err := r.FakeVMs.AddVolume(ctx, ns, vm, opts); err != nil {
		return err
	}
	return apierrors.NewBadRequest("Unable to add volume because a volume request with that name is already pending")
}

func (r racingVMs) RemoveVolume(ctx context.Context, ns, vm string, opts *kubevirtv1.RemoveVolumeOptions) error {
	if err := r.FakeVMs.RemoveVolume(ctx, ns, vm, opts); err != nil {
		return err
	}
	return apierrors.NewBadRequest("Unable to remove volume because a volume request with that name is already pending")
}

// failingVMs cannot hot-plug at all.
type failingVMs struct{ *controller.FakeVMs }

func (failingVMs) AddVolume(context.Context, string, string, *kubevirtv1.AddVolumeOptions) error {
	return apierrors.NewServiceUnavailable("virt-api is down")
}

func TestPublishRace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServer(t, g, ns, "tenant-a", racingVMs{vms})
	rsp, err := s.CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	id := rsp.GetVolume().GetVolumeId()

	_, err = s.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"})
	g.Expect(err).NotTo(HaveOccurred())

	failing := newServer(t, g, ns, "tenant-a", failingVMs{vms})
	_, err = failing.ControllerPublishVolume(ctx, publishReq(id, "node-1"))
	g.Expect(status.Code(err)).To(Equal(codes.Internal))
}

// TestListVolumes: the tenant's volumes, by ID, a page at a time, each with the node
// whose running instance has it. A VM restarted lists its volume on no node, which
// is how csi-attacher's reconciler learns to publish it again; once it has, the
// volume is listed on the node again.
func TestListVolumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	vms := &controller.FakeVMs{}
	vms.Add(nodeVM(ns, "node-1", "tenant-a"), true)
	s := newServer(t, g, ns, "tenant-a", vms)
	var ids []string
	for _, name := range []string{"pvc-1", "pvc-2", "pvc-3"} {
		rsp, err := s.CreateVolume(ctx, createReq(name, 0, nil))
		g.Expect(err).NotTo(HaveOccurred())
		ids = append(ids, rsp.GetVolume().GetVolumeId())
	}
	slices.Sort(ids)
	_, err := newServer(t, g, ns, "tenant-b", vms).CreateVolume(ctx, createReq("pvc-1", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.ControllerPublishVolume(ctx, publishReq(ids[1], "node-1"))
	g.Expect(err).NotTo(HaveOccurred())

	// published lists the IDs and published nodes of a whole listing, page by page.
	published := func(g Gomega, pageSize int32) map[string][]string {
		got := map[string][]string{}
		token := ""
		for {
			rsp, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: pageSize, StartingToken: token})
			g.Expect(err).NotTo(HaveOccurred())
			if pageSize > 0 {
				g.Expect(len(rsp.GetEntries())).To(BeNumerically("<=", pageSize))
			}
			for _, e := range rsp.GetEntries() {
				g.Expect(e.GetVolume().GetCapacityBytes()).To(Equal(controller.DefaultVolumeSize))
				got[e.GetVolume().GetVolumeId()] = e.GetStatus().GetPublishedNodeIds()
			}
			if token = rsp.GetNextToken(); token == "" {
				return got
			}
		}
	}
	want := map[string][]string{ids[0]: nil, ids[1]: {"node-1"}, ids[2]: nil}
	for _, size := range []int32{0, 1, 2, 3} {
		g.Expect(published(g, size)).To(Equal(want), "pages of %d", size)
	}
	rsp, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.GetNextToken()).To(Equal(ids[1]))

	_, err = s.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "invalid-token"})
	g.Expect(status.Code(err)).To(Equal(codes.Aborted))
	_, err = s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: -1})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))

	// Restarted, the VM runs a new instance without the volume.
	vms.Restart(ns, "node-1")
	g.Expect(published(g, 0)).To(HaveKeyWithValue(ids[1], BeEmpty()))
	_, err = s.ControllerPublishVolume(ctx, publishReq(ids[1], "node-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms.Adds).To(Equal(2))
	g.Expect(published(g, 0)).To(Equal(want))

	// Its guest ended, the instance left Failed: it uses the volume no more.
	vms.Fail(ns, "node-1")
	g.Expect(published(g, 0)).To(HaveKeyWithValue(ids[1], BeEmpty()))
}
