// Package v1alpha1 contains the knest API: the NestedCluster a platform team
// writes to get a tenant Kubernetes cluster made of KubeVirt VMs.
//
// +kubebuilder:object:generate=true
// +groupName=knest.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of knest's objects.
	GroupVersion = schema.GroupVersion{Group: "knest.dev", Version: "v1alpha1"}

	// SchemeBuilder registers knest's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds knest's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
