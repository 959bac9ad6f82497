package hostaccess

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/podsec"
)

// KubeconfigDir is where a component's containers find the tenant's admin
// kubeconfig, as file KubeconfigFile (KubeconfigVolume mounted by KubeconfigMount).
const (
	KubeconfigDir  = "/etc/knest/tenant"
	KubeconfigFile = KubeconfigDir + "/value"
)

const kubeconfigVolume = "tenant-kubeconfig"

// KubeconfigVolume is the tenant's admin kubeconfig from Secret secret (key
// "value", as Cluster API's <cluster>-kubeconfig holds it).
func KubeconfigVolume(secret string) corev1.Volume {
	return corev1.Volume{Name: kubeconfigVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret,
		Items:      []corev1.KeyToPath{{Key: "value", Path: "value"}},
	}}}
}

// KubeconfigMount mounts KubeconfigVolume read-only at KubeconfigDir.
func KubeconfigMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: kubeconfigVolume, MountPath: KubeconfigDir, ReadOnly: true}
}

// Component is one tenant's component on the host (the autoscaler, the cloud
// controller manager, the CSI controller): objects of one name in the tenant's
// namespace, its identity (Access) and a Deployment that reaches the tenant through
// the tenant's admin kubeconfig.
type Component struct {
	// Name names each of its objects.
	Name, Namespace string
	// Cluster is the tenant's; its pods are selected by it and App.
	Cluster string
	// App is its app.kubernetes.io/name.
	App string
	// Labels go on every object (knest's and Cluster API's cluster labels).
	Labels map[string]string
}

// Meta is the metadata of each of its objects, with a label map of its own.
func (c Component) Meta() metav1.ObjectMeta {
	labels := map[string]string{"app.kubernetes.io/name": c.App, "app.kubernetes.io/part-of": "knest"}
	maps.Copy(labels, c.Labels)
	return metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: labels}
}

// Selector selects its pods.
func (c Component) Selector() map[string]string {
	return map[string]string{"app.kubernetes.io/name": c.App, knestv1.ClusterNameLabel: c.Cluster}
}

// Access is its ServiceAccount, Role and RoleBinding (Render); access is its
// value of Label.
func (c Component) Access(access string, rules []rbacv1.PolicyRule) Objects {
	return Render(c.Meta(), access, rules)
}

// Deployment runs pod as the component: one replica, replaced by recreating it
// (none of them elects a leader, whose lease would live in the tenant, and two
// would act twice), as its ServiceAccount, under the restricted profile as
// podsec.NonRootUID in every container. pod's containers and volumes are the
// caller's, the kubeconfig among them (KubeconfigVolume, KubeconfigMount), in the
// caller's order: a template reordered would restart the running pods.
func (c Component) Deployment(pod corev1.PodSpec) *appsv1.Deployment {
	meta := c.Meta()
	selector := c.Selector()
	// Its own copy of the labels: the Deployment's and its pods' are not one map.
	podLabels := maps.Clone(meta.Labels)
	maps.Copy(podLabels, selector)
	pod.ServiceAccountName = c.Name
	pod.SecurityContext = podsec.Pod(podsec.NonRootUID)
	pod.Containers = slices.Clone(pod.Containers)
	for i := range pod.Containers {
		pod.Containers[i].SecurityContext = podsec.Container()
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod},
		},
	}
}

// KubeconfigDeployment is Deployment of a pod of container alone, which reaches the
// tenant through its admin kubeconfig from Secret secret: KubeconfigMount after the
// container's own mounts, KubeconfigVolume the pod's one volume.
func (c Component) KubeconfigDeployment(container corev1.Container, secret string) *appsv1.Deployment {
	container.VolumeMounts = append(slices.Clone(container.VolumeMounts), KubeconfigMount())
	return c.Deployment(corev1.PodSpec{
		Containers: []corev1.Container{container},
		Volumes:    []corev1.Volume{KubeconfigVolume(secret)},
	})
}

// HealthProbes are the probes of a component serving HTTP on its container port
// named "health": livenessPath every 30 s, the container restarted after 4 failures
// in a row; readinessPath every 10 s.
func HealthProbes(livenessPath, readinessPath string) (liveness, readiness *corev1.Probe) {
	get := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}}
	}
	return &corev1.Probe{ProbeHandler: get(livenessPath), PeriodSeconds: 30, FailureThreshold: 4},
		&corev1.Probe{ProbeHandler: get(readinessPath), PeriodSeconds: 10}
}
