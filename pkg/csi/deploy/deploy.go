// Package deploy renders knest's CSI driver for one tenant, in kubevirt-csi-driver's
// split: on the host, in the tenant's namespace, a Deployment of knest-csi's
// controller beside upstream's csi-provisioner and csi-attacher (which watch the
// tenant's API through its admin kubeconfig); in the tenant, the CSIDriver, the node
// plugin's DaemonSet and StorageClasses backed by host StorageClasses. Rendering
// only: applying the objects is the controller's.
package deploy

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/csi/controller"
)

// The images the driver runs by default. images/build.sh preloads DefaultImage in
// every node image and hack/kind/up.sh loads all three onto the kind host; both read
// these lines. DefaultImage's tag is knestcsi.Version; the sidecars' are the versions
// hack/tools/csi pins (tests check both).
const (
	DefaultImage            = "knest.local/knest-csi:v0.3.0"
	DefaultProvisionerImage = "knest.local/csi-provisioner:v5.3.0"
	DefaultAttacherImage    = "knest.local/csi-attacher:v4.13.0"
)

// Images are the images of the driver's containers; empty ones are the defaults.
type Images struct {
	// Driver is knest-csi's image, both halves (its controller on the host, its node
	// plugin in the tenant, where the node image must have preloaded it).
	Driver      string
	Provisioner string
	Attacher    string
}

// StorageClass is one tenant StorageClass and the host StorageClass behind it.
type StorageClass struct {
	// Name is the tenant StorageClass's name.
	Name string
	// HostClass is the host StorageClass of its volumes' host PVCs; empty is the
	// host's default.
	HostClass string
	// Default marks the tenant's default StorageClass (at most one).
	Default bool
	// AllowVolumeExpansion lets the tenant grow its volumes; the host class must
	// allow it too. No csi-resizer runs yet (docs/design/csi.md says why), so a
	// grown claim would wait forever: leave it false until one does.
	AllowVolumeExpansion bool
}

// Input is what one tenant's driver is rendered from.
type Input struct {
	Cluster, Namespace string
	Images             Images
	// KubeconfigSecret holds the tenant's admin kubeconfig (key "value"), for the
	// sidecars; empty is Cluster API's <cluster>-kubeconfig.
	KubeconfigSecret string
	StorageClasses   []StorageClass
	// Labels go on every host object (knest's and Cluster API's cluster labels).
	Labels map[string]string
}

// Objects are one tenant's driver: Host in the tenant's host namespace, Tenant in
// the tenant cluster.
type Objects struct {
	Host   *HostObjects
	Tenant *TenantObjects
}

// Render returns the driver's objects for in.
func Render(in Input) (*Objects, error) {
	if err := validate(in); err != nil {
		return nil, err
	}
	if in.Images.Driver == "" {
		in.Images.Driver = DefaultImage
	}
	if in.Images.Provisioner == "" {
		in.Images.Provisioner = DefaultProvisionerImage
	}
	if in.Images.Attacher == "" {
		in.Images.Attacher = DefaultAttacherImage
	}
	if in.KubeconfigSecret == "" {
		in.KubeconfigSecret = in.Cluster + "-kubeconfig"
	}
	return &Objects{Host: renderHost(in), Tenant: renderTenant(in)}, nil
}

func validate(in Input) error {
	if in.Cluster == "" || in.Namespace == "" {
		return errors.New("the CSI driver needs a cluster name and a namespace")
	}
	seen, defaults := map[string]bool{}, 0
	for _, sc := range in.StorageClasses {
		if errs := validation.IsDNS1123Subdomain(sc.Name); len(errs) > 0 {
			return fmt.Errorf("storage class name %q: %s", sc.Name, errs[0])
		}
		if seen[sc.Name] {
			return fmt.Errorf("storage class %s is named twice", sc.Name)
		}
		seen[sc.Name] = true
		if sc.Default {
			defaults++
		}
	}
	if defaults > 1 {
		return errors.New("at most one tenant storage class can be the default")
	}
	return nil
}

// List is every object, host ones first, each group in the order a fresh apply
// creates them.
func (o *Objects) List() []client.Object {
	return append(o.Host.List(), o.Tenant.List()...)
}

// labels are the common labels of the driver's objects, with extra.
func labels(component string, extra map[string]string) map[string]string {
	l := map[string]string{"app.kubernetes.io/name": component, "app.kubernetes.io/part-of": "knest"}
	maps.Copy(l, extra)
	return l
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// socketDir is where the driver's CSI socket is, in every container that uses it.
const socketDir = "/csi"

// healthPort serves knest-csi's /healthz (its --health-address).
const healthPort = 9808

func livenessProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intOrName("healthz"),
		}},
		InitialDelaySeconds: 10,
		PeriodSeconds:       30,
		TimeoutSeconds:      5,
		FailureThreshold:    4,
	}
}

// The StorageClass parameter that names the host class, as the controller service
// reads it.
const paramHostStorageClass = controller.ParamHostStorageClass
