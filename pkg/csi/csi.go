// Package csi is knest's CSI driver for tenant volumes, in the design of
// kubevirt-csi-driver: a tenant's PersistentVolume is a PersistentVolumeClaim on the
// host cluster, hot-plugged as a disk into the VirtualMachine of the tenant node that
// uses it.
//
// The driver is split in two, like kubevirt-csi-driver:
//
//   - The controller service (package controller) runs on the host, in the tenant's
//     host namespace, with a host client limited to that namespace. CreateVolume makes
//     a host PVC (labelled with the tenant cluster's name), ControllerPublishVolume
//     hot-plugs it into the running instance of the node's VirtualMachine with
//     KubeVirt's virtualmachineinstances/addvolume subresource, with a disk serial
//     derived from the volume ID (SerialFor), and ControllerUnpublishVolume/
//     DeleteVolume undo that; ControllerExpandVolume grows the claim; ListVolumes
//     says which node's instance has each volume. It acts only on PVCs labelled as its own tenant's and on VMs of its
//     own tenant's cluster, whatever volume or node ID a tenant sends.
//   - The node service (package node) runs in the tenant, as a DaemonSet. It finds the
//     hot-plugged disk under /dev/disk/by-id by its serial, formats and mounts it at
//     the staging path, and bind-mounts it (or, for block volumes, the device) into
//     the pod's target path; NodeExpandVolume grows the filesystem.
//
// Both serve the identity service (Identity) and are served on a unix socket by Run.
//
// cmd/knest-csi runs either half (its controller and node commands); package
// registration registers the node plugin with kubelet, in place of
// node-driver-registrar (which the Go module proxy does not serve); package deploy
// renders both halves for a tenant (the host Deployment with csi-provisioner and
// csi-attacher watching the tenant's API, the tenant's CSIDriver, node DaemonSet and
// StorageClasses).
//
// The knest controller applies what package deploy renders. Not done yet:
// csi-resizer (external-resizer/v2 is served, but no host class here can grow to
// try ControllerExpandVolume against: docs/design/csi.md), snapshots and clones,
// volume stats, topology and an attach limit per node. The tests here fake the
// hot-plug; e2e/tenant runs the driver on a real KubeVirt.
//
// ControllerPublishVolume waits for a hot-plug only for Config.HotplugWait; a call
// that finds it still in progress returns Unavailable and the attacher calls again.
//
// A hot-plug goes into the VM's instance only, not into the VM's spec: KubeVirt
// v1.7.0's virt-handler cannot start a kernel-boot VMI (knest's node VMs) that has
// hot-plugged volumes in its spec from the start (the second sync of such a VMI
// before its domain exists fails on the kernel artifacts' mount), so a VM that had
// its volumes persisted never started again after a restart. An instance that ends
// takes its volumes with it; the next one starts clean, ListVolumes reports the
// volume on no node, and csi-attacher's reconciler (once a minute) publishes it
// again, into the new instance, with the VolumeAttachment never detached.
//
// A Filesystem host PVC (the default, and all that node-local host storage such as
// local-path offers) is a disk to KubeVirt as the file disk.img on it. KubeVirt
// makes that file only for the PVCs a VM starts with; for a hot-plugged PVC it
// expects one (CDI writes it for DataVolumes). Without it virt-handler fails the
// hot-plug, and KubeVirt v1.7.0 then keeps a duplicate mount record of the attempt:
// removevolume fails and every later hot-plug or unplug of that VM instance stays
// pending until it restarts. So the controller never calls addvolume for a
// Filesystem PVC without disk.img: before the first one, it runs a pod of its own
// image in the tenant's namespace, on the VM's host node when known, that mounts
// the PVC and runs `knest-csi prepare-disk` (a sparse file of the volume's
// capacity, owned by KubeVirt's qemu user 107), waits for it within HotplugWait
// (Unavailable meanwhile), marks the PVC (controller.DiskImageAnnotation) and
// deletes the pod. The PVC requests the capacity plus 6%, rounded up to a MiB, for
// the filesystem's own overhead around disk.img (KubeVirt and CDI assume 5.5%); the
// volume's capacity is what the tenant asked for. Block PVCs need neither.
package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	ctrl "sigs.k8s.io/controller-runtime"
)

// DriverName is the CSI driver's name, as a tenant StorageClass's provisioner.
const DriverName = "csi.knest.dev"

// Version is the driver's vendor version and the tag of its image
// (pkg/csi/deploy.DefaultImage). Change it with every change of the driver that goes
// into an image: a tenant node runs the image its node image preloaded under that
// tag, and the host loads it under the same one.
const Version = "v0.3.0"

// PublishContextSerial is the key of the disk serial in ControllerPublishVolume's
// publish_context, which the node service looks the disk up by.
const PublishContextSerial = "serial"

// serialLength is what fits every bus: virtio-blk keeps at most 20 bytes of a serial
// (VIRTIO_BLK_ID_BYTES), SCSI more.
const serialLength = 20

// SerialFor is the disk serial of a volume: a short hex digest of its ID, so that it
// fits every bus, needs no escaping in /dev/disk/by-id names, and both services can
// derive it.
func SerialFor(volumeID string) string {
	sum := sha256.Sum256([]byte(volumeID))
	return hex.EncodeToString(sum[:])[:serialLength]
}

// Identity is the CSI identity service of both the controller and the node plugin.
type Identity struct {
	csi.UnimplementedIdentityServer
	// Version is reported as the vendor version.
	Version string
	// Ready, when set, is asked by Probe; nil means always ready.
	Ready func(ctx context.Context) error
}

var _ csi.IdentityServer = &Identity{}

func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	v := i.Version
	if v == "" {
		v = "devel"
	}
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: v}, nil
}

func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}, {
		// A plugged disk grows in the guest (KubeVirt's ExpandDisks feature gate).
		Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE,
		}},
	}}}, nil
}

func (i *Identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if i.Ready != nil {
		if err := i.Ready(ctx); err != nil {
			// The CSI spec's answer for a plugin that runs but is not ready yet.
			return &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil //nolint:nilerr // not ready is a result, not a failure
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// Run serves servers (each an identity, controller or node server, or several of
// them) on the unix socket endpoint ("unix:///path" or a path) until ctx is done. A
// stale socket file at the path is removed first. Each call's context carries ctx's
// logger (ctrl.LoggerFrom), with the call's method.
func Run(ctx context.Context, endpoint string, servers ...any) error {
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" {
		return errors.New("no CSI endpoint given")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(WithLogger(ctrl.LoggerFrom(ctx))))
	for _, srv := range servers {
		registered := false
		if v, ok := srv.(csi.IdentityServer); ok {
			csi.RegisterIdentityServer(s, v)
			registered = true
		}
		if v, ok := srv.(csi.ControllerServer); ok {
			csi.RegisterControllerServer(s, v)
			registered = true
		}
		if v, ok := srv.(csi.NodeServer); ok {
			csi.RegisterNodeServer(s, v)
			registered = true
		}
		if !registered {
			_ = lis.Close()
			return fmt.Errorf("%T is no CSI identity, controller or node server", srv)
		}
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			s.GracefulStop()
		case <-stopped:
		}
	}()
	err = s.Serve(lis)
	close(stopped)
	if err != nil {
		return fmt.Errorf("failed to serve CSI on %s: %w", path, err)
	}
	return nil
}

// WithLogger is a gRPC interceptor that puts log, with the method called, into each
// call's context, where ctrl.LoggerFrom finds it.
func WithLogger(log logr.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(logr.NewContext(ctx, log.WithValues("method", info.FullMethod)), req)
	}
}
