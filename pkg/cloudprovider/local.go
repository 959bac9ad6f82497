package cloudprovider

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managedBy is the EndpointSlice managed-by value of the slices the provider
// writes; the host's EndpointSlice controller leaves such slices alone.
const managedBy = "cloudprovider.knest.dev"

// providerIDPrefix is CAPK's provider ID scheme: kubevirt://<VM name>.
const providerIDPrefix = "kubevirt://"

// vmName is the name of the host VM of a tenant Node: from its provider ID when it
// has one (CAPK sets kubevirt://<KubevirtMachine name>, the VM's name), else the
// Node's name (CAPK names the guest's host after the machine as well).
func vmName(node *corev1.Node) string {
	if name, ok := strings.CutPrefix(node.Spec.ProviderID, providerIDPrefix); ok && name != "" {
		return name
	}
	return node.Name
}

// applyEndpointSlice writes the endpoints of the externalTrafficPolicy Local host
// Service host of svc: one per worker VM whose tenant Node is in nodes and runs a
// ready endpoint of svc. The slice is owned by the host Service, so it goes with it.
func (p *Provider) applyEndpointSlice(ctx context.Context, svc *corev1.Service, host *corev1.Service, nodes []*corev1.Node) error {
	endpoints, err := p.localEndpoints(ctx, svc, nodes)
	if err != nil {
		return err
	}
	labels := hostLabels(p.opts, svc)
	labels[discoveryv1.LabelServiceName] = host.Name
	labels[discoveryv1.LabelManagedBy] = managedBy
	slice := discoveryv1ac.EndpointSlice(host.Name, p.opts.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("v1").WithKind("Service").WithName(host.Name).WithUID(host.UID).
			WithController(true).WithBlockOwnerDeletion(true)).
		WithAddressType(discoveryv1.AddressTypeIPv4).
		WithEndpoints(endpoints...)
	for _, sp := range svc.Spec.Ports {
		protocol := cmp.Or(sp.Protocol, corev1.ProtocolTCP)
		slice.WithPorts(discoveryv1ac.EndpointPort().WithName(sp.Name).WithProtocol(protocol).WithPort(sp.NodePort))
	}
	if err := p.opts.Host.Apply(ctx, slice, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply EndpointSlice %s/%s: %w", p.opts.Namespace, host.Name, err)
	}
	return p.deleteSelectorEndpoints(ctx, host)
}

// Who else writes a Service's endpoints: the EndpointSlice controller for a Service
// with a selector, and the mirroring controller, which copies an Endpoints object
// (the endpoints controller's, for a Service with a selector) into slices.
var selectorSliceManagers = []string{"endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io"}

// deleteSelectorEndpoints deletes the endpoints the host's controllers wrote for
// host while it had a selector (externalTrafficPolicy Cluster): they leave them
// when the selector goes, and the host's kube-proxy and load balancer would still
// send to every worker, also those without a local endpoint, where the tenant's
// kube-proxy drops Local traffic. The legacy Endpoints object of that name is the
// endpoints controller's: the host Service is the provider's, so is its name.
func (p *Provider) deleteSelectorEndpoints(ctx context.Context, host *corev1.Service) error {
	list := &discoveryv1.EndpointSliceList{}
	if err := p.opts.Host.List(ctx, list, client.InNamespace(p.opts.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: host.Name}); err != nil {
		return fmt.Errorf("failed to list the EndpointSlices of %s/%s: %w", p.opts.Namespace, host.Name, err)
	}
	for i := range list.Items {
		sl := &list.Items[i]
		if !slices.Contains(selectorSliceManagers, sl.Labels[discoveryv1.LabelManagedBy]) {
			continue
		}
		if err := p.opts.Host.Delete(ctx, sl, client.Preconditions{UID: &sl.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete EndpointSlice %s/%s: %w", sl.Namespace, sl.Name, err)
		}
	}
	//nolint:staticcheck // the Endpoints API is deprecated, and the mirroring controller still reads it.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: p.opts.Namespace, Name: host.Name}}
	if err := p.opts.Host.Delete(ctx, ep); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete Endpoints %s/%s: %w", p.opts.Namespace, host.Name, err)
	}
	return nil
}

// deleteEndpointSlice deletes svc's host EndpointSlice if there is one (it has none
// with externalTrafficPolicy Cluster).
func (p *Provider) deleteEndpointSlice(ctx context.Context, svc *corev1.Service) error {
	slice := &discoveryv1.EndpointSlice{}
	key := client.ObjectKey{Namespace: p.opts.Namespace, Name: hostServiceName(svc)}
	if err := p.opts.Host.Get(ctx, key, slice); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to read EndpointSlice %s: %w", key, err)
	}
	if !p.owns(slice, svc) {
		return nil
	}
	if err := p.opts.Host.Delete(ctx, slice, client.Preconditions{UID: &slice.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete EndpointSlice %s: %w", key, err)
	}
	return nil
}

// localEndpoints are the host endpoints of svc with externalTrafficPolicy Local: the
// pod-network address of each running worker VMI of this cluster whose tenant Node
// is among nodes and has a ready endpoint of svc, with the host node it runs on
// (the host's kube-proxy and load balancer keep Local traffic to endpoints on the
// node it arrives at). With KubeVirt's bridge binding the guest owns the
// virt-launcher pod's address, which the VMI reports on that interface.
func (p *Provider) localEndpoints(ctx context.Context, svc *corev1.Service, nodes []*corev1.Node) ([]*discoveryv1ac.EndpointApplyConfiguration, error) {
	withEndpoint, err := p.nodesWithReadyEndpoints(ctx, svc)
	if err != nil {
		return nil, err
	}
	wanted := sets.New[string]()
	for _, n := range nodes {
		if withEndpoint.Has(n.Name) {
			wanted.Insert(vmName(n))
		}
	}
	if wanted.Len() == 0 {
		return nil, nil
	}

	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := p.opts.Host.List(ctx, vmis, client.InNamespace(p.opts.Namespace),
		client.MatchingLabels{capiClusterLabel: p.opts.ClusterName}); err != nil {
		return nil, fmt.Errorf("failed to list the VirtualMachineInstances of cluster %s: %w", p.opts.ClusterName, err)
	}
	var endpoints []*discoveryv1ac.EndpointApplyConfiguration
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if !wanted.Has(vmi.Name) || !isWorker(p.opts, vmi) || vmi.Status.Phase != kubevirtv1.Running {
			continue
		}
		ip := podNetworkIPv4(vmi)
		if ip == "" || vmi.Status.NodeName == "" {
			continue
		}
		endpoints = append(endpoints, discoveryv1ac.Endpoint().
			WithAddresses(ip).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(true).WithServing(true).WithTerminating(false)).
			WithNodeName(vmi.Status.NodeName).
			WithTargetRef(corev1ac.ObjectReference().
				WithAPIVersion(kubevirtv1.SchemeGroupVersion.String()).WithKind("VirtualMachineInstance").
				WithNamespace(vmi.Namespace).WithName(vmi.Name).WithUID(vmi.UID)))
	}
	slices.SortFunc(endpoints, func(a, b *discoveryv1ac.EndpointApplyConfiguration) int {
		return strings.Compare(a.Addresses[0], b.Addresses[0])
	})
	return endpoints, nil
}

// nodesWithReadyEndpoints are the tenant Nodes that run a ready endpoint of svc,
// from the tenant's EndpointSlices of svc.
func (p *Provider) nodesWithReadyEndpoints(ctx context.Context, svc *corev1.Service) (sets.Set[string], error) {
	if p.opts.Tenant == nil {
		return nil, fmt.Errorf("no tenant client: the provider was not initialized")
	}
	list, err := p.opts.Tenant.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	nodes := sets.New[string]()
	for _, slice := range list.Items {
		for _, ep := range slice.Endpoints {
			// A nil ready condition means ready (discovery/v1's contract).
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				nodes.Insert(*ep.NodeName)
			}
		}
	}
	return nodes, nil
}

// isWorker tells whether vmi carries the worker labels (a VMI's labels are its
// virt-launcher pod's, less KubeVirt's own).
func isWorker(opts Options, vmi *kubevirtv1.VirtualMachineInstance) bool {
	for k, v := range opts.WorkerSelector {
		if vmi.Labels[k] != v {
			return false
		}
	}
	return true
}

// podNetworkIPv4 is the IPv4 address the VMI reports on its pod-network interface.
func podNetworkIPv4(vmi *kubevirtv1.VirtualMachineInstance) string {
	podNetworks := sets.New[string]()
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			podNetworks.Insert(n.Name)
		}
	}
	for _, iface := range vmi.Status.Interfaces {
		if !podNetworks.Has(iface.Name) {
			continue
		}
		for _, ip := range append([]string{iface.IP}, iface.IPs...) {
			if parsed := net.ParseIP(ip); parsed != nil && parsed.To4() != nil {
				return ip
			}
		}
	}
	return ""
}
