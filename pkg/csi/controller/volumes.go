package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
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
	// CapacityAnnotation holds the volume's capacity in bytes, what the tenant
	// asked for: a Filesystem host PVC requests more (hostRequest).
	CapacityAnnotation = "csi.knest.dev/capacity"
	// DiskImageAnnotation, on a Filesystem host PVC, records that its disk.img
	// exists, and its size in bytes when it was made (see prep.go).
	DiskImageAnnotation = "csi.knest.dev/disk-image"

	// ParamHostStorageClass is the StorageClass parameter naming the host
	// StorageClass of the host PVC; empty or absent means the host's default.
	ParamHostStorageClass = "hostStorageClass"
	// ParamHostVolumeMode is the StorageClass parameter choosing the host PVC's volume
	// mode, Filesystem (the default, which every host storage class supports;
	// KubeVirt then keeps a disk image file on it) or Block. Either way the tenant
	// node sees a disk. On a Filesystem PVC KubeVirt sizes the image to the space
	// the filesystem has, which is somewhat less than the claim; CDI's DataVolumes,
	// which kubevirt-csi-driver uses, add that overhead to the claim, and so does
	// this driver (hostRequest).
	ParamHostVolumeMode = "hostVolumeMode"

	// csiParamPrefix marks the parameters that csi-provisioner adds itself.
	csiParamPrefix = "csi.storage.k8s.io/"

	mib = int64(1) << 20
	gib = int64(1) << 30
	// DefaultVolumeSize is the size of a volume whose request names none.
	DefaultVolumeSize = gib

	// filesystemOverheadPercent is what a Filesystem host PVC requests beyond the
	// volume's capacity, in percent: room for the host filesystem's own metadata and
	// reserved blocks around disk.img. KubeVirt and CDI assume 5.5% by default
	// (CDI's filesystemOverhead, 0.055; a claim of capacity/(1-0.055), about
	// capacity*1.0582, holds a disk.img of capacity); 6% covers that.
	filesystemOverheadPercent = 106
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

// HostRequest is what the host PVC of a volume of capacity bytes requests. A Block
// PVC is the disk itself: capacity. A Filesystem PVC holds the disk as a file,
// disk.img, of capacity bytes, on a filesystem that needs room of its own:
// capacity*1.06, rounded up to a whole MiB (filesystemOverheadPercent). The volume's
// reported capacity stays what the tenant asked for (CapacityAnnotation).
func HostRequest(capacity int64, mode corev1.PersistentVolumeMode) int64 {
	if mode == corev1.PersistentVolumeBlock {
		return capacity
	}
	mibs := (capacity + mib - 1) / mib
	return (mibs*filesystemOverheadPercent + 99) / 100 * mib
}

// hostPVC is the host PVC of a new volume.
func hostPVC(namespace, cluster, name string, size int64, p volumeParams) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      VolumeID(cluster, name),
			Namespace: namespace,
			Labels:    map[string]string{ClusterLabel: cluster},
			Annotations: map[string]string{
				NameAnnotation:     name,
				CapacityAnnotation: strconv.FormatInt(size, 10),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &p.volumeMode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(HostRequest(size, p.volumeMode), resource.BinarySI),
			}},
		},
	}
	if p.storageClass != "" {
		pvc.Spec.StorageClassName = &p.storageClass
	}
	return pvc
}

// capacity is the volume's capacity: CapacityAnnotation, or, on a claim made
// before the driver recorded it, the claim's request.
func capacity(pvc *corev1.PersistentVolumeClaim) int64 {
	if n, err := strconv.ParseInt(pvc.Annotations[CapacityAnnotation], 10, 64); err == nil && n > 0 {
		return n
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

// volumeMode is the host PVC's volume mode; unset is Filesystem.
func volumeMode(pvc *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode == "" {
		return corev1.PersistentVolumeFilesystem
	}
	return *pvc.Spec.VolumeMode
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
