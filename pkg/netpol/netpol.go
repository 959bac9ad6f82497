// Package netpol holds what the NetworkPolicies knest renders share: the host's DNS
// pods, the one host service a hosted control plane may reach, and the guest DNS
// resolver that tenant VMs reach instead.
package netpol

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// HostDNS selects the host cluster's DNS pods: CoreDNS as kubeadm, kind and most
// distributions deploy it. Elsewhere (OpenShift's openshift-dns, for one) a platform
// team adds a policy of its own that allows its DNS pods.
func HostDNS() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
	}
}

// DNSEgress lets pods query the host's DNS pods, over UDP and TCP.
func DNSEgress() networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{HostDNS()},
		Ports: []networkingv1.NetworkPolicyPort{Port(corev1.ProtocolUDP, 53), Port(corev1.ProtocolTCP, 53)},
	}
}

// Port is a policy port of a protocol.
func Port(protocol corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(protocol), Port: ptr.To(intstr.FromInt32(port))}
}
