package deploy

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/csi/controller"
	"github.com/knest-dev/knest/pkg/hostaccess"
)

// ControllerName is the name of the host Deployment, ServiceAccount, Role and
// RoleBinding of cluster's CSI controller.
func ControllerName(cluster string) string { return cluster + "-csi-controller" }

// HostObjects are the driver's controller on the host, in the tenant's namespace.
type HostObjects struct {
	hostaccess.Objects
	Deployment *appsv1.Deployment
}

// List is the objects in the order a fresh apply creates them.
func (o *HostObjects) List() []client.Object {
	return append(o.Objects.List(), o.Deployment)
}

const controllerComponent = "knest-csi-controller"

func renderHost(in Input) *HostObjects {
	c := hostaccess.Component{Name: ControllerName(in.Cluster), Namespace: in.Namespace, Cluster: in.Cluster,
		App: controllerComponent, Labels: in.Labels}
	access := c.Access("csi", ControllerRules())
	// Only the driver's container gets a token (projected); the sidecars, which talk
	// to the tenant, get none of the host.
	access.ServiceAccount.AutomountServiceAccountToken = ptr.To(false)
	return &HostObjects{Objects: access, Deployment: controllerDeployment(in, c)}
}

// ControllerRules are what pkg/csi/controller does in the tenant's namespace, with a
// client that reads without a cache (so no watch): it creates, reads, lists (for
// ListVolumes), annotates and grows (update) and deletes the host PVCs of the
// tenant's volumes; creates, reads (for its phase) and deletes the pod that writes a
// Filesystem PVC's disk.img before its first hot-plug (controller's prep.go);
// reads a node's VirtualMachine and its running instance; and hot-plugs and
// unplugs volumes with virt-api's VMI subresources addvolume and removevolume (PUT,
// which RBAC calls update, as KubeVirt's own kubevirt.io:edit role grants them).
// Names cannot narrow it: volumes and their prep pods are created by name at run
// time, and tenants that share a namespace share these rights; the driver acts only
// on PVCs, pods and VMs labelled with its own cluster. The knest controller, which
// grants this Role, must hold all of it (config/rbac/tenant_role.yaml).
func ControllerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "delete"}},
		{APIGroups: []string{kubevirtv1.SchemeGroupVersion.Group}, Resources: []string{"virtualmachines", "virtualmachineinstances"}, Verbs: []string{"get"}},
		{
			APIGroups: []string{controller.SubresourceGroupVersion.Group},
			Resources: []string{"virtualmachineinstances/addvolume", "virtualmachineinstances/removevolume"},
			Verbs:     []string{"update"},
		},
	}
}

// The CPU requests are about the use at rest (1 mCPU each, make bench-density), so
// that a tenant's storage costs the host's schedulable CPU little.
var (
	driverResources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	sidecarResources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
)

// serviceAccountDir is where client-go's in-cluster config reads the token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// controllerDeployment runs one replica at a time: the sidecars run without leader
// election (its lease would live in the tenant).
func controllerDeployment(in Input, c hostaccess.Component) *appsv1.Deployment {
	socket := corev1.VolumeMount{Name: "socket-dir", MountPath: socketDir}
	tenant := hostaccess.KubeconfigMount()
	address := "--csi-address=" + socketDir + "/csi.sock"
	kubeconfig := "--kubeconfig=" + hostaccess.KubeconfigFile
	sidecar := func(name, image string, args ...string) corev1.Container {
		return corev1.Container{
			Name:  name,
			Image: image,
			// A failed call is retried at least every 30 s, not up to 5 minutes: an
			// attach waits for a new node's plugin to register, or for a hot-plug,
			// that is done within seconds of the failure.
			Args:         append([]string{address, kubeconfig, "--leader-election=false", "--retry-interval-max=30s", "--v=2"}, args...),
			Resources:    *sidecarResources.DeepCopy(),
			VolumeMounts: []corev1.VolumeMount{socket, tenant},
		}
	}
	return c.Deployment(corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{
			{
				Name:  "knest-csi",
				Image: in.Images.Driver,
				Args: []string{
					"controller",
					"--namespace=" + in.Namespace,
					"--cluster=" + in.Cluster,
					"--endpoint=unix://" + socketDir + "/csi.sock",
					"--health-address=" + healthAddress(),
					// Its prep pods run this image's prepare-disk.
					"--prep-image=" + in.Images.Driver,
					// Removes the startup taint of a node whose plugin registered.
					"--tenant-kubeconfig=" + hostaccess.KubeconfigFile,
				},
				Ports:         []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}},
				LivenessProbe: livenessProbe(),
				Resources:     *driverResources.DeepCopy(),
				VolumeMounts: []corev1.VolumeMount{socket, tenant,
					{Name: "host-token", MountPath: serviceAccountDir, ReadOnly: true}},
			},
			// Creates and deletes volumes for the tenant's claims. Without
			// topology: a volume can be hot-plugged into any node's VM.
			sidecar("csi-provisioner", in.Images.Provisioner, "--default-fstype=ext4"),
			// Publishes volumes to nodes (VolumeAttachments); the driver
			// answers Unavailable while KubeVirt hot-plugs and is called again.
			sidecar("csi-attacher", in.Images.Attacher),
		},
		Volumes: []corev1.Volume{
			{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			hostaccess.KubeconfigVolume(in.KubeconfigSecret),
			hostTokenVolume(),
		},
	})
}

// hostTokenVolume is what the service account admission would mount in every
// container, for the driver's container only: a bound token, the cluster's CA and
// the namespace, where client-go's in-cluster config looks.
func hostTokenVolume() corev1.Volume {
	return corev1.Volume{Name: "host-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}

func healthAddress() string { return fmt.Sprintf(":%d", healthPort) }

func intOrName(name string) intstr.IntOrString { return intstr.FromString(name) }
