package deploy

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/registration"
)

const (
	// NodeName is the name of the node plugin's DaemonSet and ServiceAccount in the
	// tenant's NodeNamespace.
	NodeName      = "knest-csi-node"
	NodeNamespace = "kube-system"
	// DefaultClassAnnotation marks the tenant's default StorageClass.
	DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// TenantObjects are the driver's objects in the tenant cluster.
type TenantObjects struct {
	CSIDriver      *storagev1.CSIDriver
	ServiceAccount *corev1.ServiceAccount
	DaemonSet      *appsv1.DaemonSet
	StorageClasses []*storagev1.StorageClass
}

// List is the objects in the order a fresh apply creates them.
func (o *TenantObjects) List() []client.Object {
	l := []client.Object{o.CSIDriver, o.ServiceAccount, o.DaemonSet}
	for _, sc := range o.StorageClasses {
		l = append(l, sc)
	}
	return l
}

func renderTenant(in Input) *TenantObjects {
	o := &TenantObjects{
		CSIDriver: &storagev1.CSIDriver{
			TypeMeta:   typeMeta("storage.k8s.io/v1", "CSIDriver"),
			ObjectMeta: metav1.ObjectMeta{Name: knestcsi.DriverName, Labels: labels("knest-csi", nil)},
			Spec: storagev1.CSIDriverSpec{
				// ControllerPublishVolume hot-plugs the disk into the node's VM.
				AttachRequired: ptr.To(true),
				PodInfoOnMount: ptr.To(false),
				// A fresh ext4 is root's; kubelet gives it to the pod's fsGroup.
				FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			},
		},
		ServiceAccount: &corev1.ServiceAccount{
			TypeMeta:   typeMeta("v1", "ServiceAccount"),
			ObjectMeta: metav1.ObjectMeta{Name: NodeName, Namespace: NodeNamespace, Labels: labels(NodeName, nil)},
			// The node plugin does not talk to the tenant's API: kubelet calls it,
			// and its node's name comes from the downward API.
			AutomountServiceAccountToken: ptr.To(false),
		},
		DaemonSet: nodeDaemonSet(in),
	}
	for _, sc := range in.StorageClasses {
		o.StorageClasses = append(o.StorageClasses, storageClass(sc))
	}
	return o
}

// storageClass is a tenant StorageClass of the driver. WaitForFirstConsumer: a host
// PVC (and host storage) is made only once a pod uses the claim, so claims that no
// pod ever schedules with cost the host nothing, and the volume is made after its
// node is known, which topology (host zones) will need; the price is a claim that
// stays Pending until a pod uses it.
func storageClass(sc StorageClass) *storagev1.StorageClass {
	s := &storagev1.StorageClass{
		TypeMeta:             typeMeta("storage.k8s.io/v1", "StorageClass"),
		ObjectMeta:           metav1.ObjectMeta{Name: sc.Name, Labels: labels("knest-csi", nil)},
		Provisioner:          knestcsi.DriverName,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(sc.AllowVolumeExpansion),
	}
	if sc.HostClass != "" {
		s.Parameters = map[string]string{paramHostStorageClass: sc.HostClass}
	}
	if sc.Default {
		s.Annotations = map[string]string{DefaultClassAnnotation: "true"}
	}
	return s
}

// Paths on the tenant node.
const (
	kubeletDir = "/var/lib/kubelet"
	// pluginDir holds the node plugin's CSI socket: registration.Endpoint()'s directory.
	pluginDir = registration.KubeletPluginDir + "/" + knestcsi.DriverName
	// registrationDir is kubelet's plugin registry, as the container sees it.
	registrationDir = "/registration"
)

// hostTools are the node's directories the node plugin takes its userland from:
// mount, umount, blkid, fsck, mkfs.ext4, resize2fs (util-linux and e2fsprogs, in
// knest's node image and any other). Its image holds knest-csi only, the same
// image as the controller's; the node's own tools match the node's kernel. On a
// merged-/usr system /bin, /sbin, /lib and /lib64 are links into /usr, which the
// mounts follow.
var hostTools = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64"}

func nodeDaemonSet(in Input) *appsv1.DaemonSet {
	selector := map[string]string{"app.kubernetes.io/name": NodeName}
	mounts := []corev1.VolumeMount{
		// kubelet's staging and target paths, where the plugin mounts; mounts made in
		// the container must reach the node (Bidirectional).
		{Name: "kubelet-dir", MountPath: kubeletDir, MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
		{Name: "plugin-dir", MountPath: socketDir},
		{Name: "registration-dir", MountPath: registrationDir},
		// Hot-plugged disks appear here, and their /dev/disk/by-id names.
		{Name: "dev", MountPath: "/dev"},
	}
	volumes := []corev1.Volume{
		hostPath("kubelet-dir", kubeletDir, corev1.HostPathDirectory),
		hostPath("plugin-dir", pluginDir, corev1.HostPathDirectoryOrCreate),
		hostPath("registration-dir", registration.RegistryDir, corev1.HostPathDirectory),
		hostPath("dev", "/dev", corev1.HostPathDirectory),
	}
	for _, p := range hostTools {
		name := "host" + strings.ReplaceAll(p, "/", "-")
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: p, ReadOnly: true})
		volumes = append(volumes, hostPath(name, p, corev1.HostPathDirectory))
	}
	return &appsv1.DaemonSet{
		TypeMeta:   typeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: metav1.ObjectMeta{Name: NodeName, Namespace: NodeNamespace, Labels: labels(NodeName, nil)},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(NodeName, nil)},
				Spec: corev1.PodSpec{
					ServiceAccountName:           NodeName,
					AutomountServiceAccountToken: ptr.To(false),
					// Every node may get a volume, the control plane's too.
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					PriorityClassName: "system-node-critical",
					Containers: []corev1.Container{{
						Name:  "knest-csi",
						Image: in.Images.Driver,
						// Preloaded in the node image: a tenant node pulls nothing.
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{
							"node",
							"--node-id=$(NODE_NAME)",
							"--endpoint=unix://" + socketDir + "/csi.sock",
							"--kubelet-endpoint=" + registration.Endpoint(),
							"--registration-dir=" + registrationDir,
							"--health-address=" + healthAddress(),
						},
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
							{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
						},
						Ports:         []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}},
						LivenessProbe: livenessProbe(),
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: driverResources.Requests[corev1.ResourceCPU], corev1.ResourceMemory: driverResources.Requests[corev1.ResourceMemory]},
						},
						// Mounts, formats and reads block devices.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0)},
						VolumeMounts:    mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func hostPath(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
}
