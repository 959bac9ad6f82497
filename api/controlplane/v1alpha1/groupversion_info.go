// Package v1alpha1 contains knest's Cluster API control-plane provider: a
// HostedControlPlane runs a tenant's kube-apiserver, kube-controller-manager,
// kube-scheduler and etcd as pods on the host cluster, and implements Cluster API's
// control-plane contract (v1beta2) so that Cluster API, its kubeadm bootstrap
// provider and CAPK bring up the tenant's worker VMs unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.knest.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of HostedControlPlanes.
	GroupVersion = schema.GroupVersion{Group: "controlplane.knest.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
