package cloudprovider

import (
	"errors"
	"maps"
	"sync"

	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderName is the name under which the provider registers with
// k8s.io/cloud-provider; kubelets of the tenant run with --cloud-provider=external.
const ProviderName = "knest"

// fieldOwner is the server-side apply field manager of what the provider writes on
// the host.
const fieldOwner = "knest-cloud-provider"

// Labels on the host objects the provider makes: the tenant cluster and the
// identity of the tenant Service a host Service stands for. They are how the
// provider recognises its own objects, and never another tenant's, in a host
// namespace several tenants share.
const (
	ClusterLabel          = "cloudprovider.knest.dev/cluster"
	ServiceNamespaceLabel = "cloudprovider.knest.dev/service-namespace"
	ServiceNameLabel      = "cloudprovider.knest.dev/service-name"
	ServiceUIDLabel       = "cloudprovider.knest.dev/service-uid"
)

// Labels of the virt-launcher pods of a tenant's VMs. KubeVirt sets the first on
// every virt-launcher pod; CAPK sets the other two on the VMI template, and KubeVirt
// copies a VMI's labels to its pod.
const (
	virtLauncherLabel  = "kubevirt.io"
	virtLauncherValue  = "virt-launcher"
	capiClusterLabel   = "cluster.x-k8s.io/cluster-name"
	capkRoleLabel      = "cluster.x-k8s.io/role"
	capkWorkerRoleName = "worker"
)

// DefaultWorkerSelector picks the worker VMs among a tenant's VMs: CAPK labels each
// VMI (and so its virt-launcher pod) with its machine's role.
func DefaultWorkerSelector() map[string]string {
	return map[string]string{capkRoleLabel: capkWorkerRoleName}
}

// Options configure a Provider for one tenant.
type Options struct {
	// ClusterName is the tenant's Cluster API Cluster name on the host.
	ClusterName string
	// Namespace is the tenant's namespace on the host, where its VMs run and its
	// host Services are made.
	Namespace string
	// Host is a client of the host cluster; the provider reads and writes only in
	// Namespace (Services, EndpointSlices; VirtualMachines and
	// VirtualMachineInstances read only). Its scheme must know core, discovery and
	// KubeVirt types.
	Host client.Client
	// Tenant is a client of the tenant cluster, for its EndpointSlices. Nil: the
	// one that Initialize builds from the cloud-controller-manager's client builder.
	Tenant kubernetes.Interface
	// WorkerSelector are the labels, besides the cluster's and KubeVirt's
	// virt-launcher label, that pick the virt-launcher pods of the VMs that may
	// serve a load balancer (the workers, not the control plane). Nil:
	// DefaultWorkerSelector.
	WorkerSelector map[string]string
}

// Provider is knest's cloudprovider.Interface for one tenant cluster.
type Provider struct {
	opts  Options
	local *localSyncer
	// writeMu serializes the writes of one tenant's host objects: the service
	// controller's calls and the Local endpoints loop would otherwise race (a slice
	// written back just after a switch to Cluster removed it).
	writeMu sync.Mutex
}

var _ cloudprovider.Interface = &Provider{}

// New returns a provider for the tenant opts describe.
func New(opts Options) (*Provider, error) {
	if opts.ClusterName == "" || opts.Namespace == "" {
		return nil, errors.New("the tenant's cluster name and host namespace are required")
	}
	if opts.Host == nil {
		return nil, errors.New("a host client is required")
	}
	if opts.WorkerSelector == nil {
		opts.WorkerSelector = DefaultWorkerSelector()
	}
	opts.WorkerSelector = maps.Clone(opts.WorkerSelector)
	p := &Provider{opts: opts}
	p.local = newLocalSyncer(p)
	return p, nil
}

// Initialize builds the tenant client if none was given and starts the loop that
// keeps the endpoints of externalTrafficPolicy: Local load balancers current
// between the service controller's calls, until stop closes.
func (p *Provider) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if p.opts.Tenant == nil {
		p.opts.Tenant = clientBuilder.ClientOrDie("knest-cloud-provider")
	}
	go p.local.run(stop)
}

// LoadBalancer is supported: tenant Services of type LoadBalancer become host
// Services of type LoadBalancer.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	return &loadBalancers{p: p}, true
}

// Instances is not supported; InstancesV2 is.
func (p *Provider) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 answers for tenant Nodes from the host's VMs.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return &instances{p: p}, true
}

// Zones is not supported.
func (p *Provider) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not supported.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not supported: the tenant's CNI routes pod traffic itself.
func (p *Provider) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is "knest".
func (p *Provider) ProviderName() string { return ProviderName }

// HasClusterID is true: every provider serves one named tenant cluster.
func (p *Provider) HasClusterID() bool { return true }
