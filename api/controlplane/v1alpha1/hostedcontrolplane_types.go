package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Condition types and reasons of a HostedControlPlane.
const (
	// AvailableCondition is True when at least one API server replica at the spec's
	// version serves and the tenant has what `kubeadm join` reads.
	AvailableCondition = "Available"

	WaitingForEtcdReason = "WaitingForEtcd"
	// NoStorageClassReason: etcd needs a volume and the host has no class for it.
	NoStorageClassReason = "NoStorageClass"
	// TenantBootstrapFailedReason: kubeadm's Job in the tenant failed; it is
	// re-created after a backoff.
	TenantBootstrapFailedReason = "TenantBootstrapFailed"
	WaitingForAPIServerReason   = "WaitingForAPIServer"
	WaitingForTenantReason      = "WaitingForTenantBootstrap"
	AvailableReason             = "Available"
	// EtcdStoppedReason: etcd is stopped for a restore (EtcdStoppedAnnotation).
	EtcdStoppedReason = "EtcdStopped"
	// ReconcileFailedReason: the reconcile hit an error; the message is the error.
	ReconcileFailedReason = "ReconcileFailed"

	// EtcdMembersHealthyCondition is True while every etcd member is ready. False
	// says which is not and what knest does about it: a member whose volume is
	// bound to a host node it cannot run on (cordoned, not ready, gone) is replaced
	// on another node, once the others hold a quorum.
	EtcdMembersHealthyCondition = "EtcdMembersHealthy"
	EtcdMembersReadyReason      = "MembersReady"
	EtcdMemberNotReadyReason    = "MemberNotReady"
	// EtcdMemberStrandedReason: the member's volume is on a node it cannot run on,
	// and knest cannot replace it (one member, or no quorum without it).
	EtcdMemberStrandedReason = "MemberStranded"
	// EtcdReplacingMemberReason: the member is being replaced on another node:
	// stranded, or sharing a host node with another member while a node holds none.
	EtcdReplacingMemberReason = "ReplacingMember"
)

// EtcdStoppedAnnotation on a HostedControlPlane scales its etcd to zero members
// while it is set: knest's restore (internal/controller/etcdbackup) sets it,
// writes the member's volume and removes it.
const EtcdStoppedAnnotation = "controlplane.knest.dev/etcd-stopped"

// HostedControlPlaneSpec is a tenant control plane run as pods on the host.
type HostedControlPlaneSpec struct {
	// version is the tenant Kubernetes version, e.g. v1.35.4: the images of its
	// kube-apiserver, kube-controller-manager and kube-scheduler and the kubeadm that
	// configures the tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^v1\\\\.(3[0-6])\\\\.(0|[1-9][0-9]{0,3})$')",message="version must look like v1.MINOR.PATCH with a minor from 30 to 36, e.g. v1.35.4"
	Version string `json:"version"`

	// replicas is the number of API server pods (with kube-controller-manager and
	// kube-scheduler beside each, leader-elected): 1 or 3.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self == 1 || self == 3",message="a hosted control plane has 1 or 3 API server replicas"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// controlPlaneEndpoint is the tenant API endpoint; the controller sets it from
	// the API server's Service (Cluster API's contract).
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// resources of each kube-apiserver container. Here and in the other components'
	// resources, a value left out keeps the default of pkg/hosted (a memory limit,
	// no CPU limit); a memory request above the default limit drops that limit.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// controllerManager sizes kube-controller-manager, beside each kube-apiserver.
	// +optional
	ControllerManager ComponentSpec `json:"controllerManager,omitempty,omitzero"`

	// scheduler sizes kube-scheduler, beside each kube-apiserver.
	// +optional
	Scheduler ComponentSpec `json:"scheduler,omitempty,omitzero"`

	// konnectivityServer sizes the konnectivity server, beside each kube-apiserver.
	// +optional
	KonnectivityServer ComponentSpec `json:"konnectivityServer,omitempty,omitzero"`

	// service exposes the API server on the host.
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// network is the tenant's: its Service range and DNS domain (kube-apiserver,
	// kube-controller-manager and kubeadm's add-ons need them) and its pod range.
	Network NetworkSpec `json:"network"`

	// etcd's storage.
	// +optional
	Etcd EtcdSpec `json:"etcd,omitempty"`
}

// ComponentSpec sizes one container of the control plane.
type ComponentSpec struct {
	// resources of the container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ServiceSpec says how the API server is exposed.
type ServiceSpec struct {
	// type of the host Service: ClusterIP (reachable from the host's pods and the
	// tenant's VMs), NodePort or LoadBalancer.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// host is a fixed endpoint host, e.g. a load balancer's name; empty means the
	// Service's cluster IP.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Host string `json:"host,omitempty"`
	// certSANs are extra names and addresses in the API server's certificate.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	CertSANs []string `json:"certSANs,omitempty"`
}

// NetworkSpec is the tenant's network.
type NetworkSpec struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=43
	PodCIDR string `json:"podCIDR"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=43
	ServiceCIDR string `json:"serviceCIDR"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DNSDomain string `json:"dnsDomain"`
}

// EtcdSpec is etcd's storage and its members' size.
// +kubebuilder:validation:XValidation:rule="!has(self.ephemeral) || !self.ephemeral || !has(self.storageClassName) || size(self.storageClassName) == 0",message="etcd.ephemeral puts etcd on an emptyDir: it cannot have a storageClassName too"
// +kubebuilder:validation:XValidation:rule="!has(self.ephemeral) || !self.ephemeral || !has(self.members) || self.members == 1",message="etcd.ephemeral has one member"
type EtcdSpec struct {
	// members of etcd, each a pod of its StatefulSet on its own volume: 1 or 3.
	// +kubebuilder:validation:Enum=1;3
	// +kubebuilder:default=1
	// +optional
	Members int32 `json:"members,omitempty"`
	// storageClassName of etcd's volume; empty means the host's default class.
	// Without either, etcd waits (condition Available says why) unless ephemeral.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// ephemeral puts etcd on an emptyDir: its data is lost with the pod.
	// +optional
	Ephemeral bool `json:"ephemeral,omitempty"`
	// size of etcd's volume.
	// +kubebuilder:default="2Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// resources of each member's etcd container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// HostedControlPlaneStatus is what the controller observed; its fields are the ones
// Cluster API's control-plane contract (v1beta2) reads.
type HostedControlPlaneStatus struct {
	// initialization: controlPlaneInitialized is true once the API server answered and
	// the tenant has what `kubeadm join` reads (cluster-info, kubeadm-config, RBAC).
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`
	// externalManagedControlPlane is always true: the control plane has no Nodes in
	// the tenant (Cluster API's contract; without it Cluster API neither drains nor
	// deletes a removed worker's Node, waiting for control-plane machines).
	// +optional
	ExternalManagedControlPlane *bool `json:"externalManagedControlPlane,omitempty"`
	// selector selects the API server pods (the scale subresource's).
	// +optional
	Selector string `json:"selector,omitempty"`
	// replicas is the number of API server pods.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of ready API server pods.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// availableReplicas is the number of available API server pods.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`
	// upToDateReplicas is the number of API server pods at the current spec.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`
	// version is the oldest version the API server pods run.
	// +optional
	Version string `json:"version,omitempty"`
	// failedBootstrapJobs counts kubeadm Jobs in a row that failed; the next one
	// waits 10 s doubled per failure, at most 5 minutes. Zero after a success.
	// +optional
	FailedBootstrapJobs int32 `json:"failedBootstrapJobs,omitempty"`
	// etcdPersistent is true when etcd is on a PersistentVolumeClaim.
	// +optional
	EtcdPersistent *bool `json:"etcdPersistent,omitempty"`
	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Available, EtcdMembersHealthy, and Cluster API's Paused.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Initialization is Cluster API's initialization status of a control plane.
// +kubebuilder:validation:MinProperties=1
type Initialization struct {
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// HostedControlPlane is a tenant's control plane as pods on the host cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=hcp,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Initialized",type=boolean,JSONPath=`.status.initialization.controlPlaneInitialized`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostedControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostedControlPlaneSpec   `json:"spec,omitempty"`
	Status HostedControlPlaneStatus `json:"status,omitempty"`
}

// HostedControlPlaneList is a list of HostedControlPlanes.
//
// +kubebuilder:object:root=true
type HostedControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedControlPlane `json:"items"`
}

// GetConditions returns the conditions (Cluster API's condition utilities use it).
func (c *HostedControlPlane) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions.
func (c *HostedControlPlane) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

func init() {
	SchemeBuilder.Register(&HostedControlPlane{}, &HostedControlPlaneList{})
}
