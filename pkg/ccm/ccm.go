// Package ccm renders a tenant's cloud controller manager: `knest
// cloud-controller-manager`, the provider of pkg/cloudprovider under Kubernetes'
// own service and node-lifecycle controllers, running on the host in the tenant's
// namespace. It watches the tenant's Services and Nodes through the tenant's admin
// kubeconfig and makes the host LoadBalancer Services, EndpointSlices and
// NetworkPolicies of the tenant's load balancers in that namespace only.
package ccm

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hostaccess"
	"github.com/knest-dev/knest/pkg/podsec"
)

// HealthPort serves /healthz.
const HealthPort = 10258

// KubeconfigDir is where the tenant's admin kubeconfig is mounted (file "value").
const KubeconfigDir = "/etc/knest/tenant"

// resources: requests about its use at rest on kind, a limit for a tenant with many
// Services.
var resources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
}

// Name is the name of the cloud controller manager's Deployment, ServiceAccount,
// Role and RoleBinding.
func Name(cluster string) string { return cluster + "-cloud-controller-manager" }

// Input is what the cloud controller manager of one tenant is rendered from.
type Input struct {
	Cluster, Namespace string
	// Image is the knest image (`knest cloud-controller-manager`).
	Image string
	// KubeconfigSecret holds the tenant's admin kubeconfig (key "value").
	KubeconfigSecret string
	// Labels go on every object (knest's and Cluster API's cluster labels).
	Labels map[string]string
}

// Objects is one tenant's cloud controller manager.
type Objects struct {
	hostaccess.Objects
	Deployment *appsv1.Deployment
}

// List is the objects in the order a fresh apply creates them.
func (o *Objects) List() []client.Object {
	return append(o.Objects.List(), o.Deployment)
}

// Render returns the cloud controller manager's objects.
func Render(in Input) *Objects {
	name := Name(in.Cluster)
	meta := func() metav1.ObjectMeta {
		labels := map[string]string{"app.kubernetes.io/name": "cloud-controller-manager", "app.kubernetes.io/part-of": "knest"}
		maps.Copy(labels, in.Labels)
		return metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: labels}
	}
	return &Objects{
		Objects:    hostaccess.Render(meta(), "cloud-controller-manager", Rules()),
		Deployment: deployment(in, meta()),
	}
}

// Rules are what the provider does in the tenant's namespace: it writes the host
// load balancers (Services, the EndpointSlices of externalTrafficPolicy Local and
// the stale ones of a Service that had a selector, the NetworkPolicies that let
// their traffic in) and reads the VMs for the
// addresses and the existence of the tenant's Nodes. It reads and writes only
// objects with its cluster's label (pkg/cloudprovider); the Role cannot narrow
// that further, so tenants sharing a namespace share these rights.
func Rules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	write := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{corev1.GroupName}, Resources: []string{"services"}, Verbs: write},
		{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: write},
		// The endpoints controller's Endpoints of a host Service that had a selector.
		{APIGroups: []string{corev1.GroupName}, Resources: []string{"endpoints"}, Verbs: []string{"delete"}},
		{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"networkpolicies"}, Verbs: write},
		{APIGroups: []string{kubevirtv1.SchemeGroupVersion.Group}, Resources: []string{"virtualmachines", "virtualmachineinstances"}, Verbs: read},
	}
}

func deployment(in Input, meta metav1.ObjectMeta) *appsv1.Deployment {
	selector := map[string]string{"app.kubernetes.io/name": "cloud-controller-manager", knestv1.ClusterNameLabel: in.Cluster}
	// Its own copy of the labels: the Deployment's and its pods' are not one map.
	podMeta := metav1.ObjectMeta{Labels: maps.Clone(meta.Labels)}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			// One at a time, without a lease: its lease would live in the tenant.
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta,
				Spec: corev1.PodSpec{
					ServiceAccountName: meta.Name,
					SecurityContext:    podsec.Pod(65532),
					Containers: []corev1.Container{{
						Name:  "cloud-controller-manager",
						Image: in.Image,
						Args: []string{
							"cloud-controller-manager",
							"--cluster=" + in.Cluster,
							"--namespace=" + in.Namespace,
							"--tenant-kubeconfig=" + KubeconfigDir + "/value",
						},
						Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
							PeriodSeconds:    30,
							FailureThreshold: 4,
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
							PeriodSeconds: 10,
						},
						Resources:       *resources.DeepCopy(),
						SecurityContext: podsec.Container(),
						VolumeMounts:    []corev1.VolumeMount{{Name: "tenant-kubeconfig", MountPath: KubeconfigDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "tenant-kubeconfig", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: in.KubeconfigSecret,
						Items:      []corev1.KeyToPath{{Key: "value", Path: "value"}},
					}}}},
				},
			},
		},
	}
}
