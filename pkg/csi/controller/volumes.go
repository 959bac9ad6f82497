package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ClusterLabel, on a host PVC, names the tenant cluster whose volume it is. Only
	// the driver sets it; the driver acts only on PVCs that carry it with its own
	// tenant's name.
	ClusterLabel = "csi.knest.dev/cluster"
	// NameAnnotation holds the CSI name the volume was created for.
	NameAnnotation = "csi.knest.dev/name"
	// AttachedToAnnotation names the VM a volume is published to (or being
	// published to); a single-node volume goes to one VM at a time.
	AttachedToAnnotation = "csi.knest.dev/attached-to"

	// ParamHostStorageClass is the StorageClass parameter naming the host
	// StorageClass of the host PVC; empty or absent means the host's default.
	ParamHostStorageClass = "hostStorageClass"
	// ParamHostVolumeMode is the StorageClass parameter choosing the host PVC's volume
	// mode, Filesystem (the default, which every host storage class supports;
	// KubeVirt then keeps a disk image file on it) or Block. Either way the tenant
	// node sees a disk. On a Filesystem PVC KubeVirt sizes the image to the space
	// the filesystem has, which may be somewhat less than the claim (it tolerates
	// 10% by default, lessPVCSpaceToleration); CDI's DataVolumes, which
	// kubevirt-csi-driver uses, add that overhead to the claim, and this driver
	// does not yet.
	ParamHostVolumeMode = "hostVolumeMode"

	// csiParamPrefix marks the parameters that csi-provisioner adds itself.
	csiParamPrefix = "csi.storage.k8s.io/"

	mib = int64(1) << 20
	gib = int64(1) << 30
	// DefaultVolumeSize is the size of a volume whose request names none.
	DefaultVolumeSize = gib
)

// VolumeID is the volume ID, and the host PVC's name, of the volume named name of
// tenant cluster: a digest of both, so that it is a valid name of any length of
// input, the same for the same request, and distinct across tenants that share a
// host namespace. The cluster name's length goes in too, so that no two pairs of
// cluster and name give the same input.
func VolumeID(cluster, name string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s/%s", len(cluster), cluster, name))
	return "csi-" + hex.EncodeToString(sum[:])[:20]
}

// VolumeSize is the size of a new volume for capacity range r: the required bytes
// rounded up to a whole MiB, or DefaultVolumeSize (bounded by the limit) when none
// is required.
func VolumeSize(r *csi.CapacityRange) (int64, error) {
	required, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 {
		return 0, fmt.Errorf("capacity range must not be negative: required %d, limit %d", required, limit)
	}
	if limit > 0 && limit < required {
		return 0, fmt.Errorf("capacity range limit %d is below required %d", limit, required)
	}
	size := DefaultVolumeSize
	if required > 0 {
		size = (required + mib - 1) / mib * mib
	} else if limit > 0 && limit < size {
		size = limit / mib * mib
	}
	if size == 0 || (limit > 0 && size > limit) {
		return 0, errOutOfRange{fmt.Errorf("no whole number of MiB fits the capacity range: required %d, limit %d", required, limit)}
	}
	return size, nil
}

type errOutOfRange struct{ error }

// fits reports whether an existing volume of size bytes satisfies r.
func fits(size int64, r *csi.CapacityRange) bool {
	if r.GetRequiredBytes() > 0 && size < r.GetRequiredBytes() {
		return false
	}
	if r.GetLimitBytes() > 0 && size > r.GetLimitBytes() {
		return false
	}
	if r.GetRequiredBytes() == 0 && r.GetLimitBytes() == 0 {
		return size == DefaultVolumeSize
	}
	return true
}

// volumeParams are the StorageClass parameters the driver knows.
type volumeParams struct {
	storageClass string
	volumeMode   corev1.PersistentVolumeMode
}

func parseParams(params map[string]string) (volumeParams, error) {
	p := volumeParams{volumeMode: corev1.PersistentVolumeFilesystem}
	for k, v := range params {
		switch {
		case k == ParamHostStorageClass:
			p.storageClass = v
		case k == ParamHostVolumeMode:
			switch mode := corev1.PersistentVolumeMode(v); mode {
			case corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock:
				p.volumeMode = mode
			case "":
			default:
				return p, fmt.Errorf("parameter %s must be %s or %s, not %q", ParamHostVolumeMode, corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock, v)
			}
		case strings.HasPrefix(k, csiParamPrefix):
		default:
			return p, fmt.Errorf("unknown parameter %q (known: %s, %s)", k, ParamHostStorageClass, ParamHostVolumeMode)
		}
	}
	return p, nil
}

// hostPVC is the host PVC of a new volume.
func hostPVC(namespace, cluster, name string, size int64, p volumeParams) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        VolumeID(cluster, name),
			Namespace:   namespace,
			Labels:      map[string]string{ClusterLabel: cluster},
			Annotations: map[string]string{NameAnnotation: name},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &p.volumeMode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI),
			}},
		},
	}
	if p.storageClass != "" {
		pvc.Spec.StorageClassName = &p.storageClass
	}
	return pvc
}

// requestedSize is the size the volume was created with.
func requestedSize(pvc *corev1.PersistentVolumeClaim) int64 {
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

// singleNode reports whether access mode m can be served by a disk of one VM.
func singleNode(m csi.VolumeCapability_AccessMode_Mode) bool {
	switch m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// checkCapabilities returns why caps cannot be served, or "".
func checkCapabilities(caps []*csi.VolumeCapability) string {
	if len(caps) == 0 {
		return "no volume capabilities given"
	}
	for _, c := range caps {
		if c.GetBlock() == nil && c.GetMount() == nil {
			return "a volume capability has neither block nor mount access type"
		}
		if !singleNode(c.GetAccessMode().GetMode()) {
			return fmt.Sprintf("access mode %s is not supported: a volume is a disk of one node", c.GetAccessMode().GetMode())
		}
	}
	return ""
}
