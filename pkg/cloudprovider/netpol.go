package cloudprovider

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node ports a tenant Service may send load-balancer traffic to: the tenant API
// server's default --service-node-port-range, which knest does not change. Other
// ports of a VM (kubelet, SSH, etcd) are never opened by a tenant's Service.
const (
	minNodePort = 30000
	maxNodePort = 32767
)

// desiredNetworkPolicy lets traffic in to the tenant's worker VMs on the node ports
// of svc's load balancer, from anywhere: the tenant's isolation policy admits only
// its own VMs, and with externalTrafficPolicy Local the packets keep the client's
// address. It is owned by the host Service, so it goes with it.
func desiredNetworkPolicy(opts Options, svc, host *corev1.Service) *networkingv1ac.NetworkPolicyApplyConfiguration {
	ingress := networkingv1ac.NetworkPolicyIngressRule()
	for _, sp := range svc.Spec.Ports {
		protocol := sp.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		ingress.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(protocol).WithPort(intstr.FromInt32(sp.NodePort)))
	}
	return networkingv1ac.NetworkPolicy(hostServiceName(svc), opts.Namespace).
		WithLabels(hostLabels(opts, svc)).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("v1").WithKind("Service").WithName(host.Name).WithUID(host.UID)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(WorkerPodSelector(opts))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(ingress))
}

// checkNodePorts refuses a Service whose node ports are outside the node-port range:
// its load balancer would open that port of every worker VM.
func checkNodePorts(svc *corev1.Service) error {
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort != 0 && (sp.NodePort < minNodePort || sp.NodePort > maxNodePort) {
			return fmt.Errorf("port %d of Service %s/%s has node port %d, outside %d-%d; knest opens only node ports of that range to load-balancer traffic",
				sp.Port, svc.Namespace, svc.Name, sp.NodePort, minNodePort, maxNodePort)
		}
	}
	return nil
}

func (p *Provider) applyNetworkPolicy(ctx context.Context, svc, host *corev1.Service) error {
	desired := desiredNetworkPolicy(p.opts, svc, host)
	if err := p.opts.Host.Apply(ctx, desired, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply host NetworkPolicy %s/%s: %w", p.opts.Namespace, *desired.Name, err)
	}
	return nil
}

// deleteNetworkPolicy deletes svc's NetworkPolicy if it is this Service's.
// Garbage collection would too, after the host Service; this is at once.
func (p *Provider) deleteNetworkPolicy(ctx context.Context, svc *corev1.Service) error {
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: p.opts.Namespace, Name: hostServiceName(svc)}
	if err := p.opts.Host.Get(ctx, key, np); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !p.owns(np, svc) {
		return nil
	}
	if err := p.opts.Host.Delete(ctx, np, client.Preconditions{UID: &np.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete host NetworkPolicy %s: %w", key, err)
	}
	return nil
}
