package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/node"
)

// disks is a stand-in /dev/disk/by-id with the devices its links point to.
type disks struct{ byID, dev string }

func newDisks(t *testing.T) disks {
	t.Helper()
	d := disks{byID: filepath.Join(t.TempDir(), "by-id"), dev: filepath.Join(t.TempDir(), "dev")}
	for _, dir := range []string{d.byID, d.dev} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// plug makes device dev appear under link name, as udev does.
func (d disks) plug(t *testing.T, name, dev string) string {
	t.Helper()
	path := filepath.Join(d.dev, dev)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path, filepath.Join(d.byID, name)); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindDisk(t *testing.T) {
	g := NewWithT(t)
	d := newDisks(t)
	sda := d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_aaaa", "sda")
	d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_aaaa-part1", "sda1")
	d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_bbbb-part1", "sdb1")
	vdb := d.plug(t, "virtio-cccc", "vdb")
	sdc := d.plug(t, "scsi-SQEMU_QEMU_HARDDISK_dddd", "sdc")

	for serial, want := range map[string]string{"aaaa": sda, "cccc": vdb, "dddd": sdc} {
		got, err := node.FindDisk(d.byID, serial)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), serial)
	}
	// Only a partition of it, or nothing: not found.
	for _, serial := range []string{"bbbb", "aaa", "eeee"} {
		_, err := node.FindDisk(d.byID, serial)
		g.Expect(err).To(MatchError(os.ErrNotExist), serial)
	}
	for _, serial := range []string{"", "../dev/sda", "a/b", "a b"} {
		_, err := node.FindDisk(d.byID, serial)
		g.Expect(err).To(MatchError(ContainSubstring("invalid disk serial")), serial)
	}
}

func newServer(t *testing.T, g Gomega, d disks) (*node.Server, *mount.FakeMounter, *node.FakeExec) {
	t.Helper()
	m, fm, fe := node.NewFakeMounter()
	s, err := node.New(node.Config{NodeID: "node-1", DiskDir: d.byID, Mounter: m})
	g.Expect(err).NotTo(HaveOccurred())
	return s, fm, fe
}

func mountCap(fsType string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

var blockCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func TestMountVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := newDisks(t)
	s, fm, fe := newServer(t, g, d)
	const id = "csi-0123"
	// No publish context: the serial is derived from the volume ID.
	dev := d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_"+knestcsi.SerialFor(id), "sdb")
	staging := filepath.Join(t.TempDir(), "staging")
	target := filepath.Join(t.TempDir(), "pods", "target")

	stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("")}
	for range 2 {
		_, err := s.NodeStageVolume(ctx, stage)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(fe.Formatted).To(Equal(map[string]string{dev: "ext4"}))
	g.Expect(fm.MountPoints).To(ConsistOf(mount.MountPoint{Device: dev, Path: staging, Type: "ext4", Opts: []string{"defaults"}}))

	publish := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap(""), Readonly: true}
	for range 2 {
		_, err := s.NodePublishVolume(ctx, publish)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(fm.MountPoints).To(ContainElement(mount.MountPoint{Device: dev, Path: target, Opts: []string{"bind", "ro"}}))
	g.Expect(fm.MountPoints).To(HaveLen(2))

	unpublish := &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}
	for range 2 {
		_, err := s.NodeUnpublishVolume(ctx, unpublish)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(target).NotTo(BeAnExistingFile())
	unstage := &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}
	for range 2 {
		_, err := s.NodeUnstageVolume(ctx, unstage)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(fm.MountPoints).To(BeEmpty())
	// The staging path is the CO's to remove.
	g.Expect(staging).To(BeADirectory())

	// Staged again, the disk keeps its filesystem.
	fe.Formatted[dev] = "xfs"
	_, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("xfs")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fe.Formatted).To(Equal(map[string]string{dev: "xfs"}))
}

func TestBlockVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := newDisks(t)
	s, fm, fe := newServer(t, g, d)
	const id = "csi-4567"
	dev := d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_feed", "sdc")
	pc := map[string]string{knestcsi.PublishContextSerial: "feed"}
	staging := filepath.Join(t.TempDir(), "staging")
	target := filepath.Join(t.TempDir(), "dev", "pvc-x")

	_, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: blockCap, PublishContext: pc})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fm.MountPoints).To(BeEmpty())
	g.Expect(fe.Formatted).To(BeEmpty())

	publish := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap, PublishContext: pc}
	for range 2 {
		_, err = s.NodePublishVolume(ctx, publish)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(target).To(BeARegularFile())
	g.Expect(fm.MountPoints).To(ConsistOf(mount.MountPoint{Device: dev, Path: target, Opts: []string{"bind"}}))
	g.Expect(fe.Formatted).To(BeEmpty())

	_, err = s.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(target).NotTo(BeAnExistingFile())
	g.Expect(fm.MountPoints).To(BeEmpty())
}

func TestDiskNotThereYet(t *testing.T) {
	g := NewWithT(t)
	d := newDisks(t)
	s, fm, _ := newServer(t, g, d)
	staging := filepath.Join(t.TempDir(), "staging")
	_, err := s.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "csi-89ab", StagingTargetPath: staging, VolumeCapability: mountCap("")})
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	_, err = s.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: "csi-89ab", StagingTargetPath: staging, VolumeCapability: mountCap(""),
		PublishContext: map[string]string{knestcsi.PublishContextSerial: "../../etc"},
	})
	g.Expect(status.Code(err)).To(Equal(codes.Internal))
	g.Expect(fm.MountPoints).To(BeEmpty())
}

func TestExpandVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := newDisks(t)
	s, _, fe := newServer(t, g, d)
	const id = "csi-cdef"
	dev := d.plug(t, "scsi-0QEMU_QEMU_HARDDISK_"+knestcsi.SerialFor(id), "sdd")
	staging := filepath.Join(t.TempDir(), "staging")
	target := filepath.Join(t.TempDir(), "target")
	_, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap("")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap("")})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = s.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fe.Resized).To(Equal([]string{dev}))

	_, err = s.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, VolumeCapability: blockCap})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fe.Resized).To(HaveLen(1))

	_, err = s.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: filepath.Join(target, "nothing")})
	g.Expect(status.Code(err)).To(Equal(codes.NotFound))
	_, err = s.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "csi-other", VolumePath: target})
	g.Expect(status.Code(err)).To(Equal(codes.NotFound))
}
