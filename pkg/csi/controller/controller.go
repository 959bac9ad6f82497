// Package controller is the controller service of knest's CSI driver (see package
// csi): it runs on the host in a tenant's namespace and turns the tenant's volumes
// into host PVCs hot-plugged into the tenant's node VMs.
package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

// Config is what a Server works with.
type Config struct {
	// Client is a host client; the server only uses it in Namespace.
	Client client.Client
	// VMs hot-plugs volumes into the tenant's VMs.
	VMs VMs
	// Namespace is the tenant's host namespace.
	Namespace string
	// ClusterName is the tenant's cluster: the value of ClusterLabel on its volumes and
	// of Cluster API's cluster-name label on its VMs.
	ClusterName string
	// HotplugWait is how long ControllerPublishVolume and ControllerUnpublishVolume
	// wait for KubeVirt to finish a hot-plug before they return Unavailable (the
	// attacher calls again). Zero checks once. It bounds the wait for a disk
	// image's preparation (prep.go) the same way.
	HotplugWait time.Duration
	// PrepImage is the driver's own image, which the pods that prepare a
	// Filesystem volume's disk image run (`knest-csi prepare-disk`).
	PrepImage string
}

// Server is the CSI controller service.
type Server struct {
	csi.UnimplementedControllerServer
	cfg Config
}

var _ csi.ControllerServer = &Server{}

// New returns a controller service for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.VMs == nil || cfg.Namespace == "" || cfg.ClusterName == "" || cfg.PrepImage == "" {
		return nil, errors.New("the CSI controller service needs a client, VMs, a namespace, a cluster name and a prep image")
	}
	return &Server{cfg: cfg}, nil
}

const hotplugPoll = time.Second

func (s *Server) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (s *Server) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume name given")
	}
	if why := checkCapabilities(req.GetVolumeCapabilities()); why != "" {
		return nil, status.Error(codes.InvalidArgument, why)
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volumes from snapshots or other volumes are not supported")
	}
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	size, err := VolumeSize(req.GetCapacityRange())
	if err != nil {
		if errors.As(err, new(errOutOfRange)) {
			return nil, status.Error(codes.OutOfRange, err.Error())
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}

	want := hostPVC(s.cfg.Namespace, s.cfg.ClusterName, req.GetName(), size, params)
	pvc := &corev1.PersistentVolumeClaim{}
	err = s.cfg.Client.Get(ctx, client.ObjectKeyFromObject(want), pvc)
	switch {
	case apierrors.IsNotFound(err):
		if err := s.cfg.Client.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, status.Errorf(codes.Aborted, "volume %s is being created by another call", want.Name)
			}
			return nil, status.Errorf(codes.Internal, "failed to create host PVC %s/%s: %v", want.Namespace, want.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created volume", "name", req.GetName(), "pvc", want.Name, "size", size)
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: want.Name, CapacityBytes: size}}, nil
	case err != nil:
		return nil, status.Errorf(codes.Internal, "failed to get host PVC %s/%s: %v", want.Namespace, want.Name, err)
	}
	if !s.own(pvc) || pvc.Annotations[NameAnnotation] != req.GetName() {
		return nil, status.Errorf(codes.AlreadyExists, "host PVC %s/%s exists and is not volume %q of cluster %s", pvc.Namespace, pvc.Name, req.GetName(), s.cfg.ClusterName)
	}
	have := capacity(pvc)
	if !fits(have, req.GetCapacityRange()) {
		return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with %d bytes, which does not fit the requested range", req.GetName(), have)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: pvc.Name, CapacityBytes: have}}, nil
}

func (s *Server) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	}
	pvc, err := s.volume(ctx, req.GetVolumeId())
	if status.Code(err) == codes.NotFound {
		// Gone, never there, or not this tenant's: for this tenant all the same.
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if to := pvc.Annotations[AttachedToAnnotation]; to != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s", pvc.Name, to)
	}
	// A prep pod left by a publish that did not finish holds the claim.
	if err := s.deletePrepPod(ctx, pvc.Name); err != nil {
		return nil, err
	}
	// The UID precondition keeps a PVC that replaced this one under the same name.
	if err := s.cfg.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) {
		return nil, status.Errorf(codes.Internal, "failed to delete host PVC %s/%s: %v", pvc.Namespace, pvc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted volume", "pvc", pvc.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *Server) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no volume capabilities given")
	}
	if _, err := s.volume(ctx, req.GetVolumeId()); err != nil {
		return nil, err
	}
	if why := checkCapabilities(req.GetVolumeCapabilities()); why != "" {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: why}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ControllerExpandVolume grows the host PVC's request; the host's storage grows the
// volume, and KubeVirt the disk in the guest (with its ExpandDisks feature gate),
// while it is plugged. The filesystem on it the node service grows.
func (s *Server) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case req.GetCapacityRange() == nil:
		return nil, status.Error(codes.InvalidArgument, "no capacity range given")
	}
	pvc, err := s.volume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	size, err := VolumeSize(req.GetCapacityRange())
	if err != nil {
		if errors.As(err, new(errOutOfRange)) {
			return nil, status.Error(codes.OutOfRange, err.Error())
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	// A block volume has no filesystem to grow.
	nodeExpansion := req.GetVolumeCapability().GetBlock() == nil
	if have := capacity(pvc); size <= have {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: have, NodeExpansionRequired: nodeExpansion}, nil
	}
	pvc.Annotations[CapacityAnnotation] = strconv.FormatInt(size, 10)
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(HostRequest(size, volumeMode(pvc)), resource.BinarySI)
	if err := s.cfg.Client.Update(ctx, pvc); err != nil {
		switch {
		case apierrors.IsConflict(err):
			return nil, status.Errorf(codes.Aborted, "volume %s changed while expanding it", pvc.Name)
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
			// Not bound yet, or its host StorageClass does not allow expansion.
			return nil, status.Errorf(codes.FailedPrecondition, "host PVC %s/%s cannot grow: %v", pvc.Namespace, pvc.Name, err)
		}
		return nil, status.Errorf(codes.Internal, "failed to expand host PVC %s/%s: %v", pvc.Namespace, pvc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanding volume", "pvc", pvc.Name, "size", size)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: nodeExpansion}, nil
}

func (s *Server) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, node := req.GetVolumeId(), req.GetNodeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	case node == "":
		return nil, status.Error(codes.InvalidArgument, "no node ID given")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "no volume capability given")
	}
	if why := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); why != "" {
		return nil, status.Error(codes.InvalidArgument, why)
	}
	pvc, err := s.volume(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.vm(ctx, node); err != nil {
		return nil, err
	}
	// Only a running instance takes a hot-plug; one that starts later is plugged
	// then, by a call the attacher makes once ListVolumes no longer shows the volume
	// on this node.
	vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
	switch {
	case apierrors.IsNotFound(err):
		return nil, status.Errorf(codes.Unavailable, "VM %s/%s does not run", s.cfg.Namespace, node)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "failed to get VM instance %s/%s: %v", s.cfg.Namespace, node, err)
	case !vmi.IsRunning() || vmi.DeletionTimestamp != nil:
		return nil, status.Errorf(codes.Unavailable, "VM instance %s/%s is %s, not running", s.cfg.Namespace, node, vmi.Status.Phase)
	}
	if to := pvc.Annotations[AttachedToAnnotation]; to != "" && to != node {
		// A VM whose guest has stopped uses no disk: its record is released here, so
		// a VM that KubeVirt cannot clean up does not hold the volume forever.
		stopped, err := s.stopped(ctx, to)
		if err != nil {
			return nil, err
		}
		if !stopped {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s", id, to)
		}
		if err := s.unpublish(ctx, pvc, to); err != nil {
			return nil, err
		}
	}
	if pvc.Annotations[AttachedToAnnotation] == "" {
		// Claimed before the hot-plug, with optimistic locking: of two calls for two
		// nodes, one wins.
		pvc.Annotations[AttachedToAnnotation] = node
		if err := s.cfg.Client.Update(ctx, pvc); err != nil {
			if apierrors.IsConflict(err) {
				return nil, status.Errorf(codes.Aborted, "volume %s changed while publishing it", id)
			}
			return nil, status.Errorf(codes.Internal, "failed to mark volume %s as published to %s: %v", id, node, err)
		}
	}
	serial := knestcsi.SerialFor(id)
	if !hasVolume(vmi, id) {
		// Never a hot-plug of a Filesystem claim without its disk.img (prep.go).
		if err := s.prepareDisk(ctx, pvc, node); err != nil {
			return nil, err
		}
		if err := s.cfg.VMs.AddVolume(ctx, s.cfg.Namespace, node, hotplugOptions(id, serial)); err != nil {
			// virt-api refuses a second request for the volume, from a call that
			// raced this one: that is no failure.
			if vmi, getErr := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node); getErr != nil || !hasVolume(vmi, id) {
				return nil, status.Errorf(codes.Internal, "failed to hot-plug volume %s into VM instance %s/%s: %v", id, s.cfg.Namespace, node, err)
			}
		}
		ctrl.LoggerFrom(ctx).Info("Hot-plugging volume", "pvc", id, "vm", node)
	}
	if err := s.waitHotplug(ctx, node, id, true); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{knestcsi.PublishContextSerial: serial}}, nil
}

func (s *Server) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID given")
	}
	pvc, err := s.volume(ctx, id)
	if status.Code(err) == codes.NotFound {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	node := req.GetNodeId()
	if node == "" {
		// From every node: a volume is only ever on the one it is marked with.
		node = pvc.Annotations[AttachedToAnnotation]
	}
	if node == "" {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err := s.unpublish(ctx, pvc, node); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// unpublish unplugs volume pvc from VM node and clears its mark. From a VM whose
// guest has stopped (stopped) it unplugs nothing: the instance may never act again
// (a Failed instance KubeVirt cannot delete after its host node restarted or was
// lost), and the VM's next instance starts without the volume.
func (s *Server) unpublish(ctx context.Context, pvc *corev1.PersistentVolumeClaim, node string) error {
	id := pvc.Name
	_, err := s.vm(ctx, node)
	switch {
	case status.Code(err) == codes.NotFound:
		// The VM is gone, and the disk with it.
	case err != nil:
		return err
	default:
		vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return status.Errorf(codes.Internal, "failed to get VM instance %s/%s: %v", s.cfg.Namespace, node, err)
		case vmi.IsFinal():
			ctrl.LoggerFrom(ctx).Info("Releasing volume of a stopped VM", "pvc", id, "vm", node, "phase", vmi.Status.Phase)
		default:
			if hasVolume(vmi, id) {
				if err := s.cfg.VMs.RemoveVolume(ctx, s.cfg.Namespace, node, &kubevirtv1.RemoveVolumeOptions{Name: id}); err != nil && !apierrors.IsNotFound(err) {
					// A call that raced this one unplugged it first.
					if vmi, getErr := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node); getErr == nil && !vmi.IsFinal() && hasVolume(vmi, id) || getErr != nil && !apierrors.IsNotFound(getErr) {
						return status.Errorf(codes.Internal, "failed to unplug volume %s from VM instance %s/%s: %v", id, s.cfg.Namespace, node, err)
					}
				}
				ctrl.LoggerFrom(ctx).Info("Unplugging volume", "pvc", id, "vm", node)
			}
			if err := s.waitHotplug(ctx, node, id, false); err != nil {
				return err
			}
		}
	}
	if pvc.Annotations[AttachedToAnnotation] == node {
		delete(pvc.Annotations, AttachedToAnnotation)
		if err := s.cfg.Client.Update(ctx, pvc); err != nil {
			if apierrors.IsConflict(err) {
				return status.Errorf(codes.Aborted, "volume %s changed while unpublishing it", id)
			}
			return status.Errorf(codes.Internal, "failed to mark volume %s as unpublished: %v", id, err)
		}
	}
	return nil
}

// stopped reports whether VM node runs no guest that could use a disk: it has no
// instance, or one whose qemu has ended (Failed or Succeeded, phases KubeVirt never
// leaves).
func (s *Server) stopped(ctx context.Context, node string) (bool, error) {
	vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, status.Errorf(codes.Internal, "failed to get VM instance %s/%s: %v", s.cfg.Namespace, node, err)
	}
	return vmi.IsFinal(), nil
}

// waitHotplug waits up to HotplugWait until the running instance of VM node has
// the volume id ready (plugged) or no longer lists it (!plugged). An instance that
// is gone, or has stopped, has nothing to wait for: the next one starts without the
// volume.
func (s *Server) waitHotplug(ctx context.Context, node, id string, plugged bool) error {
	deadline := time.Now().Add(s.cfg.HotplugWait)
	for {
		vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Internal, "failed to get VM instance %s/%s: %v", s.cfg.Namespace, node, err)
		}
		phase, listed := volumePhase(vmi, id)
		if plugged && phase == kubevirtv1.VolumeReady || !plugged && !listed {
			return nil
		}
		if vmi.IsFinal() {
			if plugged {
				return status.Errorf(codes.Unavailable, "VM instance %s/%s stopped (%s) during the hot-plug of volume %s", s.cfg.Namespace, node, vmi.Status.Phase, id)
			}
			return nil
		}
		if !time.Now().Before(deadline) {
			what := "hot-plug"
			if !plugged {
				what = "unplug"
			}
			return status.Errorf(codes.Unavailable, "%s of volume %s on VM %s/%s is in progress (phase %q)", what, id, s.cfg.Namespace, node, phase)
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(hotplugPoll):
		}
	}
}

// own reports whether pvc is a volume of this tenant.
func (s *Server) own(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Labels[ClusterLabel] == s.cfg.ClusterName
}

// volume returns the host PVC of volume id, or NotFound when there is none that is
// this tenant's volume: a tenant sees no other claims, whatever ID it sends.
func (s *Server) volume(ctx context.Context, id string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if len(validation.IsDNS1123Subdomain(id)) > 0 {
		return nil, status.Errorf(codes.NotFound, "no volume %s", id)
	}
	err := s.cfg.Client.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: id}, pvc)
	if apierrors.IsNotFound(err) || err == nil && !s.own(pvc) {
		return nil, status.Errorf(codes.NotFound, "no volume %s", id)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to get host PVC %s/%s: %v", s.cfg.Namespace, id, err)
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	return pvc, nil
}

// vm returns the VM of node, or NotFound when there is no VM of this tenant's
// cluster by that name.
func (s *Server) vm(ctx context.Context, node string) (*kubevirtv1.VirtualMachine, error) {
	if len(validation.IsDNS1123Subdomain(node)) > 0 {
		return nil, status.Errorf(codes.NotFound, "no node %s in cluster %s", node, s.cfg.ClusterName)
	}
	vm, err := s.cfg.VMs.Get(ctx, s.cfg.Namespace, node)
	if apierrors.IsNotFound(err) || err == nil && vm.Labels[clusterv1.ClusterNameLabel] != s.cfg.ClusterName {
		return nil, status.Errorf(codes.NotFound, "no node %s in cluster %s", node, s.cfg.ClusterName)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to get VM %s/%s: %v", s.cfg.Namespace, node, err)
	}
	return vm, nil
}
