// Package cluster renders a NestedCluster into the Cluster API object graph that
// realizes it. Rendering is a pure function: the controller applies its result and
// `knest create --dry-run` prints it.
package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/autoscaler"
	"github.com/knest-dev/knest/pkg/ccm"
	"github.com/knest-dev/knest/pkg/csi/deploy"
	"github.com/knest-dev/knest/pkg/netpol"
)

// Bootstrap check strategies of CAPK.
const (
	// BootstrapCheckSSH is CAPK's default: its controller logs into the VM over SSH to
	// read Cluster API's bootstrap sentinel file.
	BootstrapCheckSSH = "ssh"
	// BootstrapCheckNone trusts the VM's readiness alone; for hosts where the CAPK
	// controller cannot reach VM IPs.
	BootstrapCheckNone = "none"
)

// ManagedBy is the value of Cluster API's managed-by annotation on the
// KubevirtCluster of a hosted control plane.
const ManagedBy = "knest"

// NoKernelBoot as Options.NodeKernelRepository: the default node images boot from
// their own bootloader.
const NoKernelBoot = "none"

// criSocket is containerd's socket in knest's node image.
const criSocket = "unix:///var/run/containerd/containerd.sock"

// Options are controller-wide rendering settings.
type Options struct {
	// NodeImageRepository is used for pools that do not name an image; the tag is the
	// tenant Kubernetes version.
	NodeImageRepository string
	// NodeKernelRepository holds the kernel-boot images of NodeImageRepository's
	// disks, tagged alike: pools that name neither an image nor a kernelBoot boot
	// their kernel from it. NoKernelBoot turns this off, for node images with a
	// bootloader.
	NodeKernelRepository string
	// BootstrapCheck is CAPK's virtualMachineBootstrapCheck strategy: ssh or none.
	BootstrapCheck string
	// CPUAllocationRatio is the host CPU overcommit of tenant VMs (vmtemplate.Input).
	CPUAllocationRatio int
	// NodeStartupTimeout is how long a machine may go without a Node before its health
	// check replaces it (default DefaultNodeStartupTimeout). How fast a VM boots and
	// joins is the host's property, so it is set per controller, not per cluster.
	NodeStartupTimeout time.Duration
	// HostSlowdown is how many times slower than hardware speed this host runs
	// tenant VMs (about 3 under software emulation; 0 or 1: hardware speed). kubeadm's
	// timeouts, and the default NodeStartupTimeout, are multiplied by it. Changing it
	// changes every tenant's kubeadm configuration, which Cluster API rolls out.
	HostSlowdown int
	// AutoscalerImage runs the tenants' cluster-autoscalers (autoscaler.DefaultImage
	// when empty).
	AutoscalerImage string
	// ProviderImage is the knest image, whose `knest cloud-controller-manager` each
	// tenant's load-balancer provider runs.
	ProviderImage string
	// CSIImages run the tenants' CSI drivers (pkg/csi/deploy's defaults when
	// empty). The driver's image must be the one the node images preload.
	CSIImages deploy.Images
	// GuestDNS is the tenant VMs' resolver; nil: the host's cluster DNS, whose
	// answers include the host's Service names.
	GuestDNS *netpol.GuestDNS
}

// DefaultNodeStartupTimeout: a nested VM that has not joined in 20 minutes is taken to
// be stuck; slower hosts (software emulation) set a longer one.
const DefaultNodeStartupTimeout = 20 * time.Minute

func (o Options) withDefaults() Options {
	setIfEmpty(&o.NodeImageRepository, knestv1.DefaultNodeImageRepository)
	setIfEmpty(&o.NodeKernelRepository, knestv1.DefaultNodeKernelRepository)
	setIfEmpty(&o.BootstrapCheck, BootstrapCheckSSH)
	if o.HostSlowdown < 1 {
		o.HostSlowdown = 1
	}
	if o.NodeStartupTimeout <= 0 {
		o.NodeStartupTimeout = DefaultNodeStartupTimeout * time.Duration(o.HostSlowdown)
	}
	return o
}

// Graph is the Cluster API object graph of one NestedCluster.
type Graph struct {
	Cluster                 *clusterv1.Cluster
	KubevirtCluster         *capkv1.KubevirtCluster
	ControlPlaneTemplate    *capkv1.KubevirtMachineTemplate
	ControlPlane            *controlplanev1.KubeadmControlPlane
	ControlPlaneHealthCheck *clusterv1.MachineHealthCheck
	// HostedControlPlane replaces the four above when spec.controlPlane.mode is
	// Hosted.
	HostedControlPlane *hcpv1.HostedControlPlane
	Pools              []Pool
	// CNI is nil when spec.network.cni is none.
	CNI          *addonsv1.ClusterResourceSet
	CNIConfigMap *corev1.ConfigMap
	// Isolation fences the cluster's VMs off from other tenants and the host.
	Isolation *networkingv1.NetworkPolicy
	// Autoscaler sizes the autoscaled pools; nil when no pool is.
	Autoscaler *autoscaler.Objects
	// CloudControllerManager gives the tenant's LoadBalancer Services host load
	// balancers; nil when spec.providers.loadBalancer.disabled.
	CloudControllerManager *ccm.Objects
	// Storage is the tenant's CSI driver: its controller on the host, and the
	// ClusterResourceSet that applies its tenant half (CSIDriver, node DaemonSet,
	// StorageClasses) from StorageConfigMap. All nil when
	// spec.providers.storage.disabled.
	Storage          *deploy.HostObjects
	StorageConfigMap *corev1.ConfigMap
	StorageCRS       *addonsv1.ClusterResourceSet
}

// Objects lists every object in the order a person reads them and a fresh apply
// creates them (the network policy before any VM, templates before what references
// them).
func (g *Graph) Objects() []client.Object {
	objs := []client.Object{g.Isolation, g.Cluster, g.KubevirtCluster}
	if g.HostedControlPlane != nil {
		objs = append(objs, g.HostedControlPlane)
	} else {
		objs = append(objs, g.ControlPlaneTemplate, g.ControlPlane, g.ControlPlaneHealthCheck)
	}
	for _, p := range g.Pools {
		objs = append(objs, p.MachineTemplate, p.BootstrapTemplate, p.MachineDeployment, p.HealthCheck)
	}
	if g.CNI != nil {
		objs = append(objs, g.CNIConfigMap, g.CNI)
	}
	if g.Autoscaler != nil {
		objs = append(objs, g.Autoscaler.List()...)
	}
	if g.CloudControllerManager != nil {
		objs = append(objs, g.CloudControllerManager.List()...)
	}
	if g.Storage != nil {
		objs = append(objs, g.Storage.List()...)
		objs = append(objs, g.StorageConfigMap, g.StorageCRS)
	}
	return objs
}

// Render returns the object graph for nc. nc must be defaulted (by the API server or
// Default); Render does not modify it.
func Render(nc *knestv1.NestedCluster, opts Options) (*Graph, error) {
	opts = opts.withDefaults()
	r := renderer{nc: nc, opts: opts, name: nc.Name, ns: nc.Namespace}
	g := &Graph{
		Isolation:       r.isolation(),
		Cluster:         r.cluster(),
		KubevirtCluster: r.kubevirtCluster(),
	}
	if nc.Spec.ControlPlane.IsHosted() {
		g.HostedControlPlane = r.hostedControlPlane()
	} else if err := r.vmControlPlane(g); err != nil {
		return nil, err
	}
	for _, pool := range nc.Spec.Workers {
		p, err := r.pool(pool)
		if err != nil {
			return nil, fmt.Errorf("failed to render worker pool %s: %w", pool.Name, err)
		}
		g.Pools = append(g.Pools, p)
	}
	if err := r.cni(g); err != nil {
		return nil, err
	}
	g.Autoscaler = r.autoscaler(g.Pools)
	if !nc.Spec.Providers.LoadBalancer.Disabled {
		g.CloudControllerManager = ccm.Render(ccm.Input{
			Cluster: r.name, Namespace: r.ns, Image: r.opts.ProviderImage,
			KubeconfigSecret: KubeconfigSecretName(r.name),
			Labels:           r.meta("", "").Labels,
		})
	}
	if !nc.Spec.Providers.Storage.Disabled {
		if err := r.storage(g); err != nil {
			return nil, fmt.Errorf("failed to render the CSI driver: %w", err)
		}
	}
	return g, nil
}

type renderer struct {
	nc   *knestv1.NestedCluster
	opts Options
	name string
	ns   string
}

// meta is the metadata every rendered object carries: the NestedCluster's label
// (so the controller finds what it owns) and the pool it belongs to.
func (r renderer) meta(name, pool string) metav1.ObjectMeta {
	labels := map[string]string{
		knestv1.ClusterNameLabel:   r.name,
		clusterv1.ClusterNameLabel: r.name,
	}
	if pool != "" {
		labels[knestv1.PoolNameLabel] = pool
	}
	return metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels}
}

func (r renderer) cluster() *clusterv1.Cluster {
	s := r.nc.Spec
	c := &clusterv1.Cluster{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("Cluster")),
		ObjectMeta: r.meta(r.name, ""),
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{s.Network.PodCIDR}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{s.Network.ServiceCIDR}},
				ServiceDomain: s.Network.DNSDomain,
			},
			ControlPlaneRef: r.controlPlaneRef(),
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: capkv1.GroupVersion.Group,
				Kind:     "KubevirtCluster",
				Name:     r.name,
			},
		},
	}
	if s.Paused {
		c.Spec.Paused = ptr(true)
	}
	return c
}

func (r renderer) controlPlaneRef() clusterv1.ContractVersionedObjectReference {
	if r.nc.Spec.ControlPlane.IsHosted() {
		return clusterv1.ContractVersionedObjectReference{APIGroup: hcpv1.GroupVersion.Group, Kind: "HostedControlPlane", Name: ControlPlaneName(r.name)}
	}
	return clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: ControlPlaneName(r.name)}
}

func (r renderer) kubevirtCluster() *capkv1.KubevirtCluster {
	api := r.nc.Spec.APIServer
	kc := &capkv1.KubevirtCluster{
		TypeMeta:   typeMeta(capkv1.GroupVersion.WithKind("KubevirtCluster")),
		ObjectMeta: r.meta(r.name, ""),
		Spec: capkv1.KubevirtClusterSpec{
			ControlPlaneServiceTemplate: capkv1.ControlPlaneServiceTemplate{
				Spec: capkv1.ServiceSpecTemplate{Type: corev1.ServiceType(api.ServiceType)},
			},
		},
	}
	if r.nc.Spec.ControlPlane.IsHosted() {
		// The HostedControlPlane serves the endpoint; CAPK then makes no Service and
		// no SSH keys (workers use BootstrapCheckNone), and knest marks the
		// KubevirtCluster ready, as Kamaji's provider does.
		kc.Annotations = map[string]string{clusterv1.ManagedByAnnotation: ManagedBy}
		return kc
	}
	// A fixed host wins over what CAPK derives from its Service (CAPK's rule).
	if api.Host != "" {
		kc.Spec.ControlPlaneEndpoint = capkv1.APIEndpoint{Host: api.Host, Port: 6443}
	}
	return kc
}

func typeMeta(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}
