package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/podsec"
)

// Disk preparation. KubeVirt plugs a Filesystem PVC into a VM as the file disk.img
// on it. It creates that file only for the PVCs a VM starts with; for a hot-plugged
// one it expects the file to be there (CDI writes it for a DataVolume). Without it
// virt-handler fails the hot-plug (lstat .../disk.img: no such file or directory),
// and KubeVirt v1.7.0 then keeps a duplicate mount record of the failed attempt, so
// that removevolume fails and every later hot-plug or unplug of that VM instance
// stays pending until the instance restarts. So the driver never hot-plugs a
// Filesystem PVC before its disk.img exists: a pod of its own image mounts the
// claim and runs `knest-csi prepare-disk`, which writes the file, sparse.

const (
	// PrepComponent is the app.kubernetes.io/name of the disk preparation pods;
	// they carry ClusterLabel too.
	PrepComponent = "knest-csi-prep"
	// DiskImageFile is the file KubeVirt uses as the disk on a Filesystem PVC.
	DiskImageFile = "disk.img"
	// prepMountPath is where the prep pod mounts the claim.
	prepMountPath = "/disk"
	// QEMUUID is KubeVirt's qemu user (and group), who owns disk.img, as CDI makes
	// it.
	QEMUUID = 107
)

var prepResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
}

// PrepPodName is the name of the pod that prepares the disk image of volume id.
func PrepPodName(id string) string { return id + "-prep" }

// needsDiskImage reports whether pvc is a Filesystem claim whose disk.img the
// driver has not made yet.
func needsDiskImage(pvc *corev1.PersistentVolumeClaim) bool {
	return volumeMode(pvc) == corev1.PersistentVolumeFilesystem && pvc.Annotations[DiskImageAnnotation] == ""
}

// prepPod is the pod that writes disk.img of size bytes on pvc, on host node
// hostNode when it is known ("" otherwise).
func (s *Server) prepPod(pvc *corev1.PersistentVolumeClaim, size int64, hostNode string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PrepPodName(pvc.Name),
			Namespace: pvc.Namespace,
			Labels:    map[string]string{ClusterLabel: s.cfg.ClusterName, "app.kubernetes.io/name": PrepComponent},
			// Goes with its claim.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: pvc.Name, UID: pvc.UID,
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The qemu user: disk.img is KubeVirt's to open.
			SecurityContext: podsec.Pod(QEMUUID),
			Containers: []corev1.Container{{
				Name:    "prepare-disk",
				Image:   s.cfg.PrepImage,
				Command: []string{"/knest-csi", "prepare-disk", "--file", prepMountPath + "/" + DiskImageFile, "--size", strconv.FormatInt(size, 10)},
				// The driver's image is preloaded, not pulled.
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Resources:                *prepResources.DeepCopy(),
				SecurityContext:          podsec.Container(),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				VolumeMounts:             []corev1.VolumeMount{{Name: "disk", MountPath: prepMountPath}},
			}},
			Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	if hostNode != "" {
		// Through the scheduler, not nodeName: a WaitForFirstConsumer claim is
		// provisioned for the node the scheduler picks, here the VM's, where
		// node-local storage must be.
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{hostNode}}},
			}}},
		}}
	}
	return pod
}

// prepareDisk makes sure the Filesystem claim pvc has its disk.img before it is
// hot-plugged into VM node: it runs a prep pod, waits for it up to HotplugWait
// (Unavailable after that: the attacher calls again), then marks the claim with
// DiskImageAnnotation and deletes the pod. A failed pod is reported and deleted, so
// that the next call makes a new one. Block claims and marked ones need nothing.
func (s *Server) prepareDisk(ctx context.Context, pvc *corev1.PersistentVolumeClaim, node string) error {
	if !needsDiskImage(pvc) {
		return nil
	}
	size := capacity(pvc)
	deadline := time.Now().Add(s.cfg.HotplugWait)
	for {
		pod, err := s.prepPodOf(ctx, pvc, size, node)
		if err != nil {
			return err
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			return s.diskPrepared(ctx, pvc, pod, size)
		case corev1.PodFailed:
			if err := s.deletePod(ctx, pod); err != nil {
				return err
			}
			return status.Errorf(codes.Internal, "failed to prepare the disk image of volume %s: pod %s failed: %s", pvc.Name, pod.Name, podFailure(pod))
		}
		if !time.Now().Before(deadline) {
			return status.Errorf(codes.Unavailable, "the disk image of volume %s is being prepared by pod %s (%s)", pvc.Name, pod.Name, podProgress(pod))
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(hotplugPoll):
		}
	}
}

// prepPodOf returns the prep pod of pvc, made now if there is none.
func (s *Server) prepPodOf(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size int64, node string) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: pvc.Namespace, Name: PrepPodName(pvc.Name)}
	pod := &corev1.Pod{}
	err := s.cfg.Client.Get(ctx, key, pod)
	switch {
	case err == nil && pod.Labels[ClusterLabel] != s.cfg.ClusterName:
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s, in the way of preparing volume %s, is not the driver's", key, pvc.Name)
	case err == nil:
		return pod, nil
	case !apierrors.IsNotFound(err):
		return nil, status.Errorf(codes.Internal, "failed to get pod %s: %v", key, err)
	}
	hostNode := s.hostNode(ctx, node)
	pod = s.prepPod(pvc, size, hostNode)
	if err := s.cfg.Client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, status.Errorf(codes.Aborted, "pod %s was created by another call", key)
		}
		return nil, status.Errorf(codes.Internal, "failed to create pod %s to prepare the disk image of volume %s: %v", key, pvc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Preparing disk image", "pvc", pvc.Name, "pod", key.Name, "size", size, "hostNode", hostNode)
	return pod, nil
}

// diskPrepared marks pvc as having a disk.img of size bytes, then deletes the
// succeeded prep pod.
func (s *Server) diskPrepared(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod, size int64) error {
	pvc.Annotations[DiskImageAnnotation] = strconv.FormatInt(size, 10)
	if err := s.cfg.Client.Update(ctx, pvc); err != nil {
		if apierrors.IsConflict(err) {
			return status.Errorf(codes.Aborted, "volume %s changed while preparing its disk image", pvc.Name)
		}
		return status.Errorf(codes.Internal, "failed to mark the disk image of volume %s as prepared: %v", pvc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Prepared disk image", "pvc", pvc.Name, "size", size)
	return s.deletePod(ctx, pod)
}

// deletePod deletes pod (the one read, by its UID); gone already is done.
func (s *Server) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := s.cfg.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Internal, "failed to delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}

// deletePrepPod deletes the prep pod of volume id, if there is one of this tenant.
func (s *Server) deletePrepPod(ctx context.Context, id string) error {
	pod := &corev1.Pod{}
	err := s.cfg.Client.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: PrepPodName(id)}, pod)
	if apierrors.IsNotFound(err) || err == nil && pod.Labels[ClusterLabel] != s.cfg.ClusterName {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "failed to get pod %s/%s: %v", s.cfg.Namespace, PrepPodName(id), err)
	}
	return s.deletePod(ctx, pod)
}

// hostNode is the host node that the running instance of VM node is on, "" when it
// does not run or is not scheduled yet.
func (s *Server) hostNode(ctx context.Context, node string) string {
	vmi, err := s.cfg.VMs.GetInstance(ctx, s.cfg.Namespace, node)
	if err != nil {
		// Not running (or not readable now): the pod goes where the scheduler puts
		// it, and the VM, when it starts, where its volumes are.
		return ""
	}
	return vmi.Status.NodeName
}

// podFailure says why a prep pod failed.
func podFailure(pod *corev1.Pod) string {
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			msg := fmt.Sprintf("exit code %d, %s", t.ExitCode, t.Reason)
			if m := strings.TrimSpace(t.Message); m != "" {
				msg += ": " + m
			}
			return msg
		}
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		return strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
	}
	return "no reason given"
}

// podProgress says where a prep pod is: its phase, and why it waits, if it says.
func podProgress(pod *corev1.Pod) string {
	phase := string(pod.Status.Phase)
	if phase == "" {
		phase = string(corev1.PodPending)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return phase + ", " + c.Reason + ": " + c.Message
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && w.Reason != "" {
			return phase + ", " + w.Reason + ": " + w.Message
		}
	}
	return phase
}
