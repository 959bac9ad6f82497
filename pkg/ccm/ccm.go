// Package ccm renders a tenant's cloud controller manager: `knest
// cloud-controller-manager`, the provider of pkg/cloudprovider under Kubernetes'
// own service and node-lifecycle controllers, running on the host in the tenant's
// namespace. It watches the tenant's Services and Nodes through the tenant's admin
// kubeconfig and makes the host LoadBalancer Services, EndpointSlices and
// NetworkPolicies of the tenant's load balancers in that namespace only.
package ccm

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/hostaccess"
)

// HealthPort serves /healthz.
const HealthPort = 10258

// resources: requests about its use at rest on kind (1.4 mCPU, 11 MiB: make
// bench-density), a limit for a tenant with many Services.
var resources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
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
	c := hostaccess.Component{Name: Name(in.Cluster), Namespace: in.Namespace, Cluster: in.Cluster,
		App: "cloud-controller-manager", Labels: in.Labels}
	return &Objects{
		Objects:    c.Access("cloud-controller-manager", Rules()),
		Deployment: deployment(in, c),
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

// deployment runs one replica at a time, without a lease: its lease would live in
// the tenant.
func deployment(in Input, c hostaccess.Component) *appsv1.Deployment {
	liveness, readiness := hostaccess.HealthProbes("/healthz", "/readyz")
	return c.KubeconfigDeployment(corev1.Container{
		Name:  "cloud-controller-manager",
		Image: in.Image,
		Args: []string{
			"cloud-controller-manager",
			"--cluster=" + in.Cluster,
			"--namespace=" + in.Namespace,
			"--tenant-kubeconfig=" + hostaccess.KubeconfigFile,
		},
		Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe:  liveness,
		ReadinessProbe: readiness,
		Resources:      *resources.DeepCopy(),
	}, in.KubeconfigSecret)
}
