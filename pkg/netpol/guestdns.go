package netpol

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// GuestDNS is the resolver tenant VMs use instead of the host's cluster DNS
// (config/guestdns): a Service whose pods answer names outside the host's cluster
// and nothing of it, so a tenant cannot look up the host's Services, other tenants'
// among them.
type GuestDNS struct {
	// Nameserver is the Service's cluster IP, the VMs' only DNS server.
	Nameserver string
	// Namespace and PodLabels select the Service's pods, Ports their ports (the
	// Service's target ports), which the VMs' policy lets them reach.
	Namespace string
	PodLabels map[string]string
	Ports     []networkingv1.NetworkPolicyPort
}

// GuestDNSFromService describes the resolver behind svc.
func GuestDNSFromService(svc *corev1.Service) (*GuestDNS, error) {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("guest DNS Service %s/%s has no cluster IP", svc.Namespace, svc.Name)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("guest DNS Service %s/%s selects no pods", svc.Namespace, svc.Name)
	}
	d := &GuestDNS{Nameserver: svc.Spec.ClusterIP, Namespace: svc.Namespace, PodLabels: svc.Spec.Selector}
	for _, p := range svc.Spec.Ports {
		target := p.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target.IntVal = p.Port
		}
		d.Ports = append(d.Ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(p.Protocol), Port: ptr.To(target)})
	}
	return d, nil
}

// Egress lets pods query the resolver's pods.
func (d *GuestDNS) Egress() networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: d.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: d.PodLabels},
		}},
		Ports: d.Ports,
	}
}
