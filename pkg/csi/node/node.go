// Package node is the node service of knest's CSI driver (see package csi): it runs
// in the tenant, on every node, and mounts the disks that the controller service
// hot-plugs into the node's VM.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
	ctrl "sigs.k8s.io/controller-runtime"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

const (
	// DefaultDiskDir is where udev names disks by their serial.
	DefaultDiskDir = "/dev/disk/by-id"
	// DefaultFSType is the filesystem of a mount volume whose capability names none.
	DefaultFSType = "ext4"
)

// Config is what a Server works with.
type Config struct {
	// NodeID is this node's name, which is its VM's name on the host.
	NodeID string
	// DiskDir is DefaultDiskDir, or a stand-in for tests.
	DiskDir string
	// Mounter formats and mounts; mount.NewSafeFormatAndMount(mount.New(""),
	// exec.New()) on a node.
	Mounter *mount.SafeFormatAndMount
}

// Server is the CSI node service.
type Server struct {
	csi.UnimplementedNodeServer
	cfg Config
}

var _ csi.NodeServer = &Server{}

// New returns a node service for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.NodeID == "" || cfg.Mounter == nil {
		return nil, errors.New("the CSI node service needs a node ID and a mounter")
	}
	if cfg.DiskDir == "" {
		cfg.DiskDir = DefaultDiskDir
	}
	return &Server{cfg: cfg}, nil
}

// validSerial keeps a serial from naming anything but a file in the disk directory.
var validSerial = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// DiskNames are the names that udev gives in /dev/disk/by-id to a disk with serial
// on each bus KubeVirt offers: SCSI (its vital product data pages 0x83 and 0x80)
// and virtio-blk.
func DiskNames(serial string) []string {
	return []string{
		"scsi-0QEMU_QEMU_HARDDISK_" + serial,
		"scsi-SQEMU_QEMU_HARDDISK_" + serial,
		"virtio-" + serial,
	}
}

// FindDisk returns the device of the disk with serial, resolved from its link in
// dir; an error that errors.Is os.ErrNotExist when there is none (yet).
func FindDisk(dir, serial string) (string, error) {
	if !validSerial.MatchString(serial) {
		return "", fmt.Errorf("invalid disk serial %q", serial)
	}
	for _, name := range DiskNames(serial) {
		dev, err := filepath.EvalSymlinks(filepath.Join(dir, name))
		if err == nil {
			return dev, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("failed to resolve disk %s: %w", name, err)
		}
	}
	return "", fmt.Errorf("no disk with serial %s in %s: %w", serial, dir, os.ErrNotExist)
}

func (s *Server) disk(volumeID string, publishContext map[string]string) (string, error) {
	serial := publishContext[knestcsi.PublishContextSerial]
	if serial == "" {
		serial = knestcsi.SerialFor(volumeID)
	}
	dev, err := FindDisk(s.cfg.DiskDir, serial)
	if errors.Is(err, os.ErrNotExist) {
		// The hot-plug has not reached the guest yet; kubelet calls again.
		return "", status.Errorf(codes.Unavailable, "disk of volume %s not found: %v", volumeID, err)
	}
	if err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	return dev, nil
}

func (s *Server) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.cfg.NodeID}, nil
}

func (s *Server) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "no volume capability given")
	}
	if c.GetBlock() == nil && c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume capability has neither block nor mount access type")
	}
	return nil
}

func (s *Server) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "no staging target path given")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	dev, err := s.disk(req.GetVolumeId(), req.GetPublishContext())
	if err != nil {
		return nil, err
	}
	mnt := req.GetVolumeCapability().GetMount()
	if mnt == nil {
		// A block volume is published as the device itself; nothing to stage.
		return &csi.NodeStageVolumeResponse{}, nil
	}
	staging := req.GetStagingTargetPath()
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to create staging path %s: %v", staging, err)
	}
	notMnt, err := s.cfg.Mounter.IsLikelyNotMountPoint(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to check staging path %s: %v", staging, err)
	}
	if !notMnt {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	fsType := mnt.GetFsType()
	if fsType == "" {
		fsType = DefaultFSType
	}
	if err := s.cfg.Mounter.FormatAndMount(dev, staging, fsType, mnt.GetMountFlags()); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to format and mount %s at %s: %v", dev, staging, err)
	}
	ctrl.LoggerFrom(ctx).Info("Staged volume", "volume", req.GetVolumeId(), "device", dev, "path", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (s *Server) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "no staging target path given")
	}
	// The staging path is the CO's: unmount it, leave it.
	staging := req.GetStagingTargetPath()
	notMnt, err := s.cfg.Mounter.IsLikelyNotMountPoint(staging)
	if errors.Is(err, os.ErrNotExist) {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to check staging path %s: %v", staging, err)
	}
	if !notMnt {
		if err := s.cfg.Mounter.Unmount(staging); err != nil {
			return nil, status.Errorf(codes.Internal, "failed to unmount %s: %v", staging, err)
		}
		ctrl.LoggerFrom(ctx).Info("Unstaged volume", "volume", req.GetVolumeId(), "path", staging)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (s *Server) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "no target path given")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	options := []string{"bind"}
	if req.GetReadonly() {
		options = append(options, "ro")
	}

	var source string
	if mnt := req.GetVolumeCapability().GetMount(); mnt != nil {
		if req.GetStagingTargetPath() == "" {
			return nil, status.Error(codes.FailedPrecondition, "no staging target path given: the volume must be staged first")
		}
		source = req.GetStagingTargetPath()
		options = append(options, mnt.GetMountFlags()...)
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "failed to create target path %s: %v", target, err)
		}
	} else {
		dev, err := s.disk(req.GetVolumeId(), req.GetPublishContext())
		if err != nil {
			return nil, err
		}
		source = dev
		// A block volume's target is a file the device is bind-mounted on.
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "failed to create parent of target path %s: %v", target, err)
		}
		f, err := os.OpenFile(target, os.O_CREATE, 0o640)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "failed to create target file %s: %v", target, err)
		}
		_ = f.Close()
	}

	notMnt, err := s.cfg.Mounter.IsLikelyNotMountPoint(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to check target path %s: %v", target, err)
	}
	if !notMnt {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := s.cfg.Mounter.Mount(source, target, "", options); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to bind-mount %s at %s: %v", source, target, err)
	}
	ctrl.LoggerFrom(ctx).Info("Published volume", "volume", req.GetVolumeId(), "path", target)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (s *Server) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "no target path given")
	}
	// Unmounts (if mounted) and removes the target path, which the spec leaves to the
	// driver; a path that is not there is done.
	if err := mount.CleanupMountPoint(req.GetTargetPath(), s.cfg.Mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to unmount %s: %v", req.GetTargetPath(), err)
	}
	ctrl.LoggerFrom(ctx).Info("Unpublished volume", "volume", req.GetVolumeId(), "path", req.GetTargetPath())
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume grows the filesystem on a volume's disk to the disk's size, once
// the host storage and KubeVirt have grown the disk.
func (s *Server) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetVolumePath() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume path given")
	}
	path := req.GetVolumePath()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s not found", path)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to check volume path %s: %v", path, err)
	}
	// NodeExpandVolume has no publish context; the serial is the volume ID's.
	dev, err := FindDisk(s.cfg.DiskDir, knestcsi.SerialFor(req.GetVolumeId()))
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "disk of volume %s not found: %v", req.GetVolumeId(), err)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if req.GetVolumeCapability().GetBlock() != nil || !fi.IsDir() {
		// A block volume: the device is all there is.
		return &csi.NodeExpandVolumeResponse{}, nil
	}
	if _, err := mount.NewResizeFs(s.cfg.Mounter.Exec).Resize(dev, path); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to grow the filesystem of %s at %s: %v", dev, path, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanded volume", "volume", req.GetVolumeId(), "device", dev, "path", path)
	return &csi.NodeExpandVolumeResponse{}, nil
}
