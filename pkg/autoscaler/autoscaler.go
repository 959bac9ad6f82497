// Package autoscaler renders a tenant's cluster-autoscaler: the upstream Kubernetes
// cluster-autoscaler with its clusterapi provider, running on the host in the
// tenant's namespace. It sizes the tenant's autoscaled pools by scaling their
// MachineDeployments (the min/max and capacity annotations pkg/cluster sets), and
// reads the tenant's pods and nodes through the tenant's admin kubeconfig.
package autoscaler

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hostaccess"
)

// DefaultImage is the cluster-autoscaler built from the module the Go proxy serves,
// k8s.io/autoscaler/cluster-autoscaler at commit 1959f5f61f6c (June 2025), with
// only the clusterapi provider and its scale to zero fixed (hack/autoscaler.mk
// builds it; hack/autoscaler-build.sh says what it fixes).
const DefaultImage = "knest.local/cluster-autoscaler:v1.33.0-1959f5f61f6c-knest.1"

// Defaults of the autoscaler's flags that spec.autoscaler sets (the upstream ones).
const (
	DefaultScaleDownUnneededTime  = 10 * time.Minute
	DefaultScaleDownDelayAfterAdd = 10 * time.Minute
)

// upstreamRecheck is the autoscaler's own --unremovable-node-recheck-timeout.
const upstreamRecheck = 5 * time.Minute

// HealthPort serves /health-check, which goes unhealthy when the autoscaler's loop
// stops running.
const HealthPort = 8085

// capiVersion is the Cluster API version the autoscaler reads. Its commit predates
// v1beta2 and looks the infrastructure template up by the apiVersion of
// infrastructureRef, which v1beta2 dropped; Cluster API v1.13 still serves
// v1beta1, converting on the fly.
const capiVersion = "v1beta1"

// resources: requests about its use at rest on kind, a limit for a larger tenant.
var resources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
}

// Name is the name of the autoscaler's Deployment, ServiceAccount, Role and
// RoleBinding.
func Name(cluster string) string { return cluster + "-autoscaler" }

// Input is what the autoscaler of one tenant is rendered from.
type Input struct {
	Cluster, Namespace string
	// Image is the autoscaler's image (DefaultImage when empty).
	Image string
	// MachineDeployments are the names of the autoscaled pools' MachineDeployments:
	// the only ones the autoscaler may scale.
	MachineDeployments []string
	// KubeconfigSecret holds the tenant's admin kubeconfig (key "value").
	KubeconfigSecret string
	Spec             knestv1.AutoscalerSpec
	// Labels go on every object (knest's and Cluster API's cluster labels).
	Labels map[string]string
}

// Objects is one tenant's autoscaler.
type Objects struct {
	hostaccess.Objects
	Deployment *appsv1.Deployment
}

// List is the objects in the order a fresh apply creates them.
func (o *Objects) List() []client.Object {
	return append(o.Objects.List(), o.Deployment)
}

// Render returns the autoscaler's objects.
func Render(in Input) *Objects {
	c := hostaccess.Component{Name: Name(in.Cluster), Namespace: in.Namespace, Cluster: in.Cluster,
		App: "cluster-autoscaler", Labels: in.Labels}
	return &Objects{
		Objects:    c.Access("autoscaler", rules(in.MachineDeployments)),
		Deployment: deployment(in, c),
	}
}

// rules are what the clusterapi provider does in the tenant's namespace: it watches
// Cluster API's machines and the infrastructure templates (for the capacity of a
// pool at zero), annotates a machine it picked for removal, and scales the
// MachineDeployment, only those of the tenant's autoscaled pools. Reads and
// Machine updates cannot be narrowed by name: tenants that share a namespace share
// the reads, and admission policy knest-autoscaler-fence keeps each autoscaler to
// its own cluster's Machines (docs/design/autoscaling.md).
func rules(machineDeployments []string) []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments", "machinesets", "machines", "machinepools"}, Verbs: read},
		{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machines"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments/scale"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: machineDeployments},
		{APIGroups: []string{capkv1.GroupVersion.Group}, Resources: []string{"kubevirtmachinetemplates"}, Verbs: read},
	}
}

func deployment(in Input, c hostaccess.Component) *appsv1.Deployment {
	image := in.Image
	if image == "" {
		image = DefaultImage
	}
	unneeded, afterAdd := DefaultScaleDownUnneededTime, DefaultScaleDownDelayAfterAdd
	if d := in.Spec.ScaleDownUnneededTime; d != nil {
		unneeded = d.Duration
	}
	if d := in.Spec.ScaleDownDelayAfterAdd; d != nil {
		afterAdd = d.Duration
	}
	liveness, readiness := hostaccess.HealthProbes("/health-check", "/health-check")
	// One replica: two would both scale the same pools.
	return c.KubeconfigDeployment(corev1.Container{
		Name:  "cluster-autoscaler",
		Image: image,
		Args: []string{
			"--cloud-provider=clusterapi",
			fmt.Sprintf("--node-group-auto-discovery=clusterapi:namespace=%s,clusterName=%s", in.Namespace, in.Cluster),
			// The tenant's API for pods and nodes; Cluster API's on the
			// host through the pod's own service account.
			"--kubeconfig=" + hostaccess.KubeconfigFile,
			"--clusterapi-cloud-config-authoritative",
			// One replica, and its lease would live in the tenant.
			"--leader-elect=false",
			// Raising minReplicas above a pool's size scales it up.
			"--enforce-node-group-min-size",
			"--scale-down-unneeded-time=" + unneeded.String(),
			// A node found busy is looked at again after this (upstream: 5m);
			// no later than it could have become unneeded.
			"--unremovable-node-recheck-timeout=" + min(unneeded, upstreamRecheck).String(),
			"--scale-down-delay-after-add=" + afterAdd.String(),
			fmt.Sprintf("--address=:%d", HealthPort),
			"--v=2",
		},
		Env:            []corev1.EnvVar{{Name: "CAPI_VERSION", Value: capiVersion}},
		Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe:  liveness,
		ReadinessProbe: readiness,
		Resources:      *resources.DeepCopy(),
	}, in.KubeconfigSecret)
}
