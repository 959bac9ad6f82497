package controller

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// volumeIDPattern is what VolumeID makes; a page token is one.
var volumeIDPattern = regexp.MustCompile(`^csi-[0-9a-f]{20}$`)

// ListVolumes lists the tenant's volumes, in the order of their IDs, each with the
// node it is plugged into: the node it is marked published to, as long as that
// node's VM instance runs and has the volume. It is how a volume comes back after
// its VM restarts: the new instance starts without it, csi-attacher's reconciler
// (every minute) finds the VolumeAttachment attached but the volume published
// nowhere, and publishes it again. A page's next token is the last ID it holds,
// so that a page goes on after it whatever was created or deleted meanwhile.
func (s *Server) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d is negative", req.GetMaxEntries())
	}
	after := req.GetStartingToken()
	if after != "" && !volumeIDPattern.MatchString(after) {
		return nil, status.Errorf(codes.Aborted, "starting_token %q is no token of this driver", after)
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := s.cfg.Client.List(ctx, list, client.InNamespace(s.cfg.Namespace), client.MatchingLabels{ClusterLabel: s.cfg.ClusterName}); err != nil {
		return nil, status.Errorf(codes.Internal, "failed to list host PVCs in %s: %v", s.cfg.Namespace, err)
	}
	// A claim being deleted is a volume DeleteVolume has deleted (only unpublished
	// ones are), which the API server keeps until nothing mounts it on the host.
	pvcs := slices.DeleteFunc(list.Items, func(p corev1.PersistentVolumeClaim) bool {
		return p.Name <= after || p.DeletionTimestamp != nil
	})
	slices.SortFunc(pvcs, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	rsp := &csi.ListVolumesResponse{}
	if n := int(req.GetMaxEntries()); n > 0 && len(pvcs) > n {
		pvcs = pvcs[:n]
		rsp.NextToken = pvcs[n-1].Name
	}
	for i := range pvcs {
		nodes, err := s.publishedTo(ctx, &pvcs[i])
		if err != nil {
			return nil, err
		}
		rsp.Entries = append(rsp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: &csi.Volume{VolumeId: pvcs[i].Name, CapacityBytes: capacity(&pvcs[i])},
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: nodes},
		})
	}
	return rsp, nil
}

// publishedTo is the node volume pvc is plugged into, if any: the node it is
// marked with, whose VM instance runs and has the volume in its spec.
func (s *Server) publishedTo(ctx context.Context, pvc *corev1.PersistentVolumeClaim) ([]string, error) {
	node := pvc.Annotations[AttachedToAnnotation]
	if node == "" {
		return nil, nil
	}
	vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, status.Errorf(codes.Internal, "failed to get VM instance %s/%s: %v", s.cfg.Namespace, node, err)
	case vmi.IsFinal() || !hasVolume(vmi, pvc.Name):
		return nil, nil
	}
	return []string{node}, nil
}
