package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// addressRetryInterval is how often the service controller asks again for the
// address of a host load balancer that has none yet.
const addressRetryInterval = 5 * time.Second

// loadBalancers is the provider's cloudprovider.LoadBalancer: one host Service of
// type LoadBalancer per tenant Service of type LoadBalancer.
type loadBalancers struct {
	p *Provider
}

var _ cloudprovider.LoadBalancer = &loadBalancers{}

// GetLoadBalancerName is the host Service's name: "a" and the tenant Service's UID
// without dashes (32 characters), unique across tenants sharing a namespace.
func (l *loadBalancers) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return hostServiceName(svc)
}

func hostServiceName(svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// GetLoadBalancer returns the host Service's load balancer status.
func (l *loadBalancers) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	host, err := l.p.hostService(ctx, svc)
	if err != nil || host == nil {
		return nil, false, err
	}
	return loadBalancerStatus(host), true, nil
}

// EnsureLoadBalancer creates or updates the host Service (and, with
// externalTrafficPolicy Local, its endpoints) and returns its status. While the
// host load balancer has no address it returns a RetryError, so the service
// controller asks again at a fixed interval instead of recording an empty status.
func (l *loadBalancers) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	host, err := l.p.ensure(ctx, svc, nodes)
	if err != nil {
		return nil, err
	}
	status := loadBalancerStatus(host)
	if len(status.Ingress) == 0 {
		return nil, api.NewRetryError(fmt.Sprintf("the host load balancer %s/%s has no address yet", host.Namespace, host.Name), addressRetryInterval)
	}
	return status, nil
}

// UpdateLoadBalancer brings the host Service (ports, endpoints) up to date.
func (l *loadBalancers) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	_, err := l.p.ensure(ctx, svc, nodes)
	return err
}

// EnsureLoadBalancerDeleted deletes the host Service and its endpoints; nothing to
// delete (none, or only an object of that name that is not this Service's load
// balancer) is success.
func (l *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	l.p.writeMu.Lock()
	defer l.p.writeMu.Unlock()
	l.p.local.forget(svc)
	host, err := l.p.hostService(ctx, svc)
	var notOwned *notOwnedError
	if errors.As(err, &notOwned) {
		// Nothing of this Service's is there to delete, and what is there is left
		// alone; failing would hold the tenant Service's deletion for ever.
		klog.FromContext(ctx).Info("Not deleting a host Service that is not this Service's load balancer", "service", klog.KObj(svc), "hostService", notOwned.key)
		return nil
	}
	if err != nil || host == nil {
		return err
	}
	if err := l.p.deleteEndpointSlice(ctx, svc); err != nil {
		return err
	}
	if err := l.p.deleteNetworkPolicy(ctx, svc); err != nil {
		return err
	}
	if err := l.p.opts.Host.Delete(ctx, host, client.Preconditions{UID: &host.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete host Service %s/%s: %w", host.Namespace, host.Name, err)
	}
	klog.FromContext(ctx).Info("Deleted host load balancer", "service", klog.KObj(svc), "hostService", klog.KObj(host))
	return nil
}

// ensure applies the host Service for svc and, with externalTrafficPolicy Local,
// its EndpointSlice; it returns the host Service as the server has it.
func (p *Provider) ensure(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) (*corev1.Service, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	// Refuses a name taken by an object that is not this Service's load balancer.
	if _, err := p.hostService(ctx, svc); err != nil {
		return nil, err
	}
	if err := checkNodePorts(svc); err != nil {
		return nil, err
	}
	desired, err := desiredHostService(p.opts, svc)
	if err != nil {
		return nil, err
	}
	if err := p.opts.Host.Apply(ctx, desired, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("failed to apply host Service %s/%s: %w", p.opts.Namespace, *desired.Name, err)
	}
	host, err := p.hostService(ctx, svc)
	if err != nil {
		return nil, err
	}
	if host == nil {
		return nil, fmt.Errorf("host Service %s/%s went away while it was applied", p.opts.Namespace, *desired.Name)
	}
	if err := p.applyNetworkPolicy(ctx, svc, host); err != nil {
		return nil, err
	}

	if isLocal(svc) {
		if err := p.applyEndpointSlice(ctx, svc, host, nodes); err != nil {
			return nil, err
		}
		p.local.remember(svc, nodes)
	} else {
		p.local.forget(svc)
		if err := p.deleteEndpointSlice(ctx, svc); err != nil {
			return nil, err
		}
	}
	return host, nil
}

// hostService returns the host Service of svc, nil if there is none. An object of
// that name that is not svc's load balancer (another tenant's, someone else's) is an
// error, and the provider neither changes nor deletes it.
func (p *Provider) hostService(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	host := &corev1.Service{}
	key := client.ObjectKey{Namespace: p.opts.Namespace, Name: hostServiceName(svc)}
	if err := p.opts.Host.Get(ctx, key, host); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read host Service %s: %w", key, err)
	}
	if !p.owns(host, svc) {
		return nil, &notOwnedError{key: key, svc: svc, cluster: p.opts.ClusterName}
	}
	return host, nil
}

// notOwnedError is a host Service that has the name of svc's load balancer but is
// not it.
type notOwnedError struct {
	key     client.ObjectKey
	svc     *corev1.Service
	cluster string
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("host Service %s exists and is not the load balancer of Service %s/%s of cluster %s; it is left alone",
		e.key, e.svc.Namespace, e.svc.Name, e.cluster)
}

// owns tells whether obj is a host object of svc's load balancer.
func (p *Provider) owns(obj client.Object, svc *corev1.Service) bool {
	l := obj.GetLabels()
	return l[ClusterLabel] == p.opts.ClusterName && l[ServiceUIDLabel] == string(svc.UID)
}

func isLocal(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// hostLabels are the labels of every host object of svc's load balancer.
func hostLabels(opts Options, svc *corev1.Service) map[string]string {
	return map[string]string{
		ClusterLabel:          opts.ClusterName,
		ServiceNamespaceLabel: svc.Namespace,
		ServiceNameLabel:      svc.Name,
		ServiceUIDLabel:       string(svc.UID),
	}
}

// WorkerPodSelector is the selector of the virt-launcher pods of the tenant's worker
// VMs: the host Service's selector with externalTrafficPolicy Cluster.
func WorkerPodSelector(opts Options) map[string]string {
	sel := maps.Clone(opts.WorkerSelector)
	if sel == nil {
		sel = DefaultWorkerSelector()
	}
	sel[capiClusterLabel] = opts.ClusterName
	sel[virtLauncherLabel] = virtLauncherValue
	return sel
}

// desiredHostService is the host Service for the tenant Service svc: type
// LoadBalancer, one port per tenant port whose target is the tenant port's node
// port on the VMs. With externalTrafficPolicy Cluster it selects all worker VMs;
// with Local it has no selector (its EndpointSlice lists the VMs) and keeps the
// client's address.
func desiredHostService(opts Options, svc *corev1.Service) (*corev1ac.ServiceApplyConfiguration, error) {
	if len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ports", svc.Namespace, svc.Name)
	}
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceTypeLoadBalancer)
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort == 0 {
			return nil, fmt.Errorf("port %d of Service %s/%s has no node port (allocateLoadBalancerNodePorts: false?); the host load balancer forwards to the tenant's node ports",
				sp.Port, svc.Namespace, svc.Name)
		}
		protocol := sp.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		spec.WithPorts(corev1ac.ServicePort().
			WithName(sp.Name).
			WithProtocol(protocol).
			WithPort(sp.Port).
			WithTargetPort(intstr.FromInt32(sp.NodePort)))
	}
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		spec.WithLoadBalancerSourceRanges(svc.Spec.LoadBalancerSourceRanges...)
	}
	if isLocal(svc) {
		spec.WithExternalTrafficPolicy(corev1.ServiceExternalTrafficPolicyLocal)
	} else {
		spec.WithExternalTrafficPolicy(corev1.ServiceExternalTrafficPolicyCluster).
			WithSelector(WorkerPodSelector(opts))
	}
	return corev1ac.Service(hostServiceName(svc), opts.Namespace).
		WithLabels(hostLabels(opts, svc)).
		WithSpec(spec), nil
}

// loadBalancerStatus is the tenant's view of the host load balancer: its addresses.
func loadBalancerStatus(host *corev1.Service) *corev1.LoadBalancerStatus {
	status := &corev1.LoadBalancerStatus{}
	for _, in := range host.Status.LoadBalancer.Ingress {
		out := corev1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		if in.IPMode != nil {
			mode := *in.IPMode
			out.IPMode = &mode
		}
		status.Ingress = append(status.Ingress, out)
	}
	return status
}
