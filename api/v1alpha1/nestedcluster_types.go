package v1alpha1

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults. DefaultVersion is the newest Kubernetes version knest builds a node image
// for (images/), within what the pinned Cluster API release (v1.13) supports.
const (
	DefaultVersion     = "v1.35.4"
	DefaultPodCIDR     = "10.243.0.0/16"
	DefaultServiceCIDR = "10.95.0.0/16"
	DefaultDNSDomain   = "tenant.local"
	DefaultPoolName    = "workers"
	// DefaultNodeImageRepository is where node images are looked up when a pool
	// does not name one; the tag is the Kubernetes version.
	DefaultNodeImageRepository = "knest/node"
	// DefaultNodeKernelRepository holds the kernel-boot images that go with them:
	// knest's node disk has no bootloader, so its nodes boot their kernel directly.
	DefaultNodeKernelRepository = "knest/node-kernel"
	// DefaultKernelArgs is the kernel command line of knest's node image. Not
	// tsc=reliable, though the HPET the kernel falls back to under emulation is 16 times
	// slower to read: a starved VM can calibrate its TSC wrong (docs/design/guest-clocksource.md).
	DefaultKernelArgs          = "root=LABEL=knest-root ro console=ttyS0"
	DefaultDrainTimeoutSeconds = 300
	// DefaultCPU and DefaultMemory are a VM's shape when the spec gives none; the CRD's
	// defaults (markers on MachineSpec) say the same.
	DefaultCPU    = 2
	DefaultMemory = "4Gi"
	// DefaultBackupInterval and DefaultBackupKeep schedule a snapshot an hour and
	// keep a day of them; the CRD's defaults (markers on BackupSpec) say the same.
	DefaultBackupInterval = time.Hour
	DefaultBackupKeep     = 24

	// MinVersion and MaxVersion bound the tenant Kubernetes minors Cluster API v1.13
	// supports for workload clusters (its book's version table); the CRD's version
	// rule encodes the same range.
	MinVersion = "v1.30.0"
	MaxVersion = "v1.36.99"
	// MaxKubeletSkew is how many minors a pool's kubelets may stay behind the control
	// plane (Kubernetes' version skew policy; kubeadm's is the same since v1.29).
	MaxKubeletSkew = 3
)

// Finalizer keeps a NestedCluster until everything it created is gone.
const Finalizer = "knest.dev/nestedcluster"

// ClusterNameLabel is set on every object knest creates for a NestedCluster.
const ClusterNameLabel = "knest.dev/cluster"

// TenantNamespaceLabel, set to "true" on a host namespace by a host admin, lets
// knest make and run tenants there: the controller binds its namespaced role
// (ClusterRole knest-tenant: Secrets, workloads, volumes) in that namespace only,
// and an admission policy refuses its writes anywhere else.
const TenantNamespaceLabel = "knest.dev/tenants"

// NamespaceNotEnabledMessage is what the controller and the CLI say of a namespace
// without TenantNamespaceLabel.
func NamespaceNotEnabledMessage(ns string) string {
	return fmt.Sprintf("namespace %s is not enabled for tenants, so knest creates nothing in it: a host admin enables it with `kubectl label namespace %s %s=true`",
		ns, ns, TenantNamespaceLabel)
}

// PoolNameLabel marks objects that belong to one worker pool; the control plane uses
// ControlPlanePool.
const PoolNameLabel = "knest.dev/pool"

// ControlPlanePool is the pool label value of control-plane objects.
const ControlPlanePool = "control-plane"

// Phase is a one-word summary of where a NestedCluster is.
// +kubebuilder:validation:Enum=Provisioning;Running;Scaling;Upgrading;Deleting;Failed;Paused
type Phase string

const (
	PhaseProvisioning Phase = "Provisioning"
	PhaseRunning      Phase = "Running"
	PhaseScaling      Phase = "Scaling"
	PhaseUpgrading    Phase = "Upgrading"
	PhaseDeleting     Phase = "Deleting"
	PhaseFailed       Phase = "Failed"
	PhasePaused       Phase = "Paused"
)

// Condition types and reasons.
const (
	// ReadyCondition summarizes the others: True when the tenant cluster serves its API
	// and every pool has all its nodes ready.
	ReadyCondition = "Ready"
	// TopologyReconciledCondition is True when every Cluster API object matches the spec.
	TopologyReconciledCondition = "TopologyReconciled"
	// ControlPlaneReadyCondition is True when Cluster API has observed the current
	// control-plane spec and all its machines exist, are up to date and ready, with
	// none to spare.
	ControlPlaneReadyCondition = "ControlPlaneReady"
	// WorkersReadyCondition is True when the same holds for every pool.
	WorkersReadyCondition = "WorkersReady"
	// InfrastructureReadyCondition is True when the host side (KubevirtCluster,
	// its API Service) is ready.
	InfrastructureReadyCondition = "InfrastructureReady"
	// TenantStateCondition is False when the tenant's API answers without the state
	// it had: a control plane that came back blank (its kube-system namespace is not
	// the one knest first saw, status.tenantID). Ready follows it.
	TenantStateCondition = "TenantState"
	// EtcdPersistentCondition says whether the tenant's etcd outlives the loss of its
	// pod or VM. It does not count towards Ready: an ephemeral etcd is a choice.
	EtcdPersistentCondition = "EtcdPersistent"
	// WorkersScalableCondition is False while a pool is held at another minor than
	// the control plane: Cluster API's MachineSet preflight check KubeadmVersionSkew
	// then refuses to create machines for it, so it can neither scale up, nor have an
	// unhealthy machine replaced, nor roll out a changed machine shape. It does not
	// count towards Ready: the pool's nodes run as they are.
	WorkersScalableCondition = "WorkersScalable"
	// AutoscalerReadyCondition is present while a pool has autoscaling: True when
	// the tenant's cluster-autoscaler runs and reports itself healthy. It does not
	// count towards Ready: the nodes serve without it.
	AutoscalerReadyCondition = "AutoscalerReady"
	// LoadBalancerReadyCondition is present while the load-balancer provider is on:
	// True when the tenant's cloud controller manager runs. Not part of Ready: the
	// cluster works without it, only its LoadBalancer Services wait.
	LoadBalancerReadyCondition = "LoadBalancerReady"
	// StorageReadyCondition is present while the storage provider is on: True when
	// the controller of the tenant's CSI driver runs on the host. Not part of Ready:
	// only the tenant's volume claims wait.
	StorageReadyCondition = "StorageReady"
	// HostSpreadCondition is present while the tenant has running VMs: True when no
	// two VMs of one pool (the control plane counts as one) run on the same host
	// node, False naming those that do, so that one host node's drain or loss takes
	// them together. knest only prefers distinct nodes: a host with fewer nodes that
	// fit than VMs still runs them all. Not part of Ready.
	HostSpreadCondition = "HostSpread"
	// LiveMigratableCondition is present while the tenant has running VMs: what
	// KubeVirt says of their live migration (its VMI condition LiveMigratable),
	// False naming each pool whose VMs cannot and KubeVirt's reason. Either way a
	// host drain hands each VM to CAPK, which drains its tenant node and has KubeVirt
	// restart it on another host node (evictionStrategy External). Not part of Ready.
	LiveMigratableCondition = "LiveMigratable"
	// HostNodesReadyCondition is present while the tenant has VMs on host nodes:
	// True when each of those nodes is ready, False naming the VMs whose host node is
	// not ready or gone. KubeVirt does not restart such a VM elsewhere until the node
	// comes back or an operator declares it gone (deletes its Node object, or taints
	// it node.kubernetes.io/out-of-service); the tenant node's health check replaces
	// its Machine meanwhile. Not part of Ready.
	HostNodesReadyCondition = "HostNodesReady"

	ReconciledReason             = "Reconciled"
	ApplyFailedReason            = "ApplyFailed"
	WaitingForInfraReason        = "WaitingForInfrastructure"
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	ScalingUpReason              = "ScalingUp"
	ScalingDownReason            = "ScalingDown"
	RollingOutReason             = "RollingOut"
	// ChangePendingReason: Cluster API has not yet observed the latest change.
	ChangePendingReason = "ChangePending"
	// UpgradeHeldReason: spec.version waits for the previous upgrade to finish.
	UpgradeHeldReason   = "UpgradeHeld"
	NodesNotReadyReason = "NodesNotReady"
	ReadyReason         = "Ready"
	PausedReason        = "Paused"
	// NamespaceNotEnabledReason: the NestedCluster's namespace lacks
	// TenantNamespaceLabel, so knest creates nothing for it.
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
	DeletingReason            = "Deleting"
	ClusterFailedReason       = "ClusterFailed"
	// StateLostReason: the tenant API answers as another, blank cluster.
	StateLostReason = "StateLost"
	// StateKeptReason: the tenant API answers with the cluster knest first saw.
	StateKeptReason = "StateKept"
	// StateUnknownReason: the tenant API has not answered yet.
	StateUnknownReason = "StateUnknown"
	// PersistentVolumeReason: etcd is on a PersistentVolumeClaim of the host.
	PersistentVolumeReason = "PersistentVolume"
	// EphemeralEtcdReason: etcd is on an emptyDir or a VM's root disk, as the spec
	// asked (controlPlane.etcd.ephemeral).
	EphemeralEtcdReason = "EphemeralByRequest"
	// ScalableReason: Cluster API can create machines for every pool.
	ScalableReason = "Scalable"
	// PoolVersionHeldReason: a pool is held at another minor than the control plane,
	// and Cluster API creates no machines for it (condition WorkersScalable).
	PoolVersionHeldReason = "PoolVersionHeld"
	// ProviderRunningReason: a provider's Deployment (the autoscaler, the cloud
	// controller manager) is available and reports healthy.
	ProviderRunningReason = "Running"
	// ProviderStartingReason: its Deployment is not available yet (its health
	// check failing included; the cloud controller manager waits for the tenant's
	// API).
	ProviderStartingReason = "Starting"
	// SpreadReason: each pool's VMs are on distinct host nodes.
	SpreadReason = "Spread"
	// SharedHostNodeReason: VMs of one pool share a host node (condition HostSpread).
	SharedHostNodeReason = "SharedHostNode"
	// LiveMigratableReason: KubeVirt can live-migrate every VM of the tenant.
	LiveMigratableReason = "LiveMigratable"
	// NotLiveMigratableReason: KubeVirt cannot live-migrate some VMs (condition
	// LiveMigratable names the pools and KubeVirt's reasons).
	NotLiveMigratableReason = "NotLiveMigratable"
	// HostNodesReadyReason: every host node running a VM of the tenant is ready.
	HostNodesReadyReason = "HostNodesReady"
	// HostNodeNotReadyReason: a VM of the tenant is on a host node that is not ready
	// or gone (condition HostNodesReady names them).
	HostNodeNotReadyReason = "HostNodeNotReady"
)

// CNI names the network plugin knest installs into the tenant.
// +kubebuilder:validation:Enum=flannel;none
type CNI string

const (
	// CNIFlannel installs flannel with VXLAN on port 8473, so it does not collide with a
	// host pod network that uses VXLAN on the default port 4789.
	CNIFlannel CNI = "flannel"
	// CNINone installs nothing; the tenant brings its own.
	CNINone CNI = "none"
)

// RootDiskType picks how a node's root disk is provided.
// +kubebuilder:validation:Enum=ContainerDisk;DataVolume
type RootDiskType string

const (
	// RootDiskContainerDisk boots from an ephemeral containerDisk: fast, nothing
	// persists across a VM restart.
	RootDiskContainerDisk RootDiskType = "ContainerDisk"
	// RootDiskDataVolume imports the image into a PVC through CDI: the node keeps its
	// disk across restarts.
	RootDiskDataVolume RootDiskType = "DataVolume"
)

// NestedClusterSpec is what a tenant cluster should look like.
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || !has(self.version) || !self.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || self.workers.all(w, !has(w.version) || !w.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || ((int(self.version.split('.')[1]) > int(w.version.split('.')[1]) || (int(self.version.split('.')[1]) == int(w.version.split('.')[1]) && int(self.version.split('.')[2]) >= int(w.version.split('.')[2]))) && int(w.version.split('.')[1]) + 3 >= int(self.version.split('.')[1])))",message="a worker pool's version must be no newer than spec.version and at most 3 minors older (Kubernetes' kubelet skew policy), e.g. v1.34.4 with spec.version v1.35.4"
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || !has(oldSelf.workers) || !has(oldSelf.version) || !oldSelf.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || self.workers.all(w, !has(w.version) || !w.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || oldSelf.workers.all(o, o.name != w.name || (has(o.version) && !o.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$')) || (int(w.version.split('.')[1]) > int((has(o.version) ? o.version : oldSelf.version).split('.')[1]) || (int(w.version.split('.')[1]) == int((has(o.version) ? o.version : oldSelf.version).split('.')[1]) && int(w.version.split('.')[2]) >= int((has(o.version) ? o.version : oldSelf.version).split('.')[2])))))",message="a worker pool's version cannot go backwards (nodes cannot be downgraded); hold a pool at the version it runs, e.g. the previous spec.version"
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || !has(self.version) || !self.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || self.workers.all(w, !has(w.version) || !w.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || w.version.split('.')[1] == self.version.split('.')[1] || (has(w.replicas) ? w.replicas : 1) == 0 || (has(oldSelf.workers) && oldSelf.workers.exists(o, o.name == w.name && (has(o.replicas) ? o.replicas : 1) >= (has(w.replicas) ? w.replicas : 1))))",message="a worker pool held at an older minor than spec.version cannot gain replicas (nor be added with any): Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew); let the pool catch up first (remove workers[].version: knest upgrade --release-pool)"
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || !has(self.version) || !self.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || self.workers.all(w, !has(w.autoscaling) || !has(w.version) || !w.version.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || w.version.split('.')[1] == self.version.split('.')[1])",message="a worker pool held at an older minor than spec.version cannot be autoscaled: Cluster API creates machines only at the control plane's minor (MachineSet preflight check KubeadmVersionSkew), so the autoscaler could add no node; let the pool catch up first (remove workers[].version: knest upgrade --release-pool), or leave out its autoscaling"
// +kubebuilder:validation:XValidation:rule="(has(self.providers) && has(self.providers.storage) && has(self.providers.storage.disabled) && self.providers.storage.disabled) == (has(oldSelf.providers) && has(oldSelf.providers.storage) && has(oldSelf.providers.storage.disabled) && oldSelf.providers.storage.disabled)",message="providers.storage.disabled cannot change after creation: the tenant's volumes depend on the CSI driver"
type NestedClusterSpec struct {
	// version is the tenant Kubernetes version, e.g. v1.35.4. Upgrades go one minor at
	// a time; downgrades are refused.
	// +kubebuilder:default="v1.35.4"
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:XValidation:rule="self.matches('^v1\\\\.(3[0-6])\\\\.(0|[1-9][0-9]{0,3})$')",message="version must look like v1.MINOR.PATCH with a minor from 30 to 36 (the range Cluster API v1.13 supports), e.g. v1.35.4"
	// +kubebuilder:validation:XValidation:rule="!oldSelf.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || !self.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || int(self.split('.')[1]) > int(oldSelf.split('.')[1]) || (int(self.split('.')[1]) == int(oldSelf.split('.')[1]) && int(self.split('.')[2]) >= int(oldSelf.split('.')[2]))",message="version cannot go backwards: downgrades are not supported by kubeadm"
	// +kubebuilder:validation:XValidation:rule="!oldSelf.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || !self.matches('^v1\\\\.[0-9]+\\\\.[0-9]+$') || int(self.split('.')[1]) <= int(oldSelf.split('.')[1]) + 1",message="version can move forward by at most one minor at a time (kubeadm's upgrade rule), e.g. v1.34.x to v1.35.x"
	// +optional
	Version string `json:"version,omitempty"`

	// controlPlane sizes the control-plane nodes.
	// +kubebuilder:default={}
	// +optional
	ControlPlane ControlPlaneSpec `json:"controlPlane,omitempty"`

	// workers are the named worker pools (at most 12, which keeps the per-pool CEL
	// rules within the API server's cost budget). Pools can be added, removed and
	// scaled, also to and from zero.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=12
	// +optional
	Workers []WorkerPool `json:"workers,omitempty"`

	// network sets the tenant's pod and service networks. They must not overlap each
	// other, and should not overlap the host's; they cannot change after creation.
	// +kubebuilder:default={}
	// +optional
	Network NetworkSpec `json:"network,omitempty"`

	// apiServer says how the tenant API endpoint is exposed on the host.
	// +kubebuilder:default={}
	// +optional
	APIServer APIServerSpec `json:"apiServer,omitempty"`

	// backup schedules snapshots of the tenant's etcd onto a volume of the host, in
	// the cluster's namespace; `knest backup` takes one at once and `knest restore`
	// brings the tenant back to one.
	// +kubebuilder:default={}
	// +optional
	Backup BackupSpec `json:"backup,omitempty"`

	// autoscaler tunes the tenant's cluster-autoscaler, which knest runs on the host
	// while any pool has autoscaling.
	// +optional
	Autoscaler AutoscalerSpec `json:"autoscaler,omitempty"`

	// providers are what knest runs on the host for the tenant's own workloads: its
	// load balancers and its volumes. Each is on unless turned off here.
	// +optional
	Providers ProvidersSpec `json:"providers,omitempty,omitzero"`

	// paused stops knest (and Cluster API) from changing the tenant cluster.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ProvidersSpec turns the tenant's providers on or off.
type ProvidersSpec struct {
	// loadBalancer gives the tenant's Services of type LoadBalancer an address of the
	// host's load balancer (MetalLB, a cloud's): knest runs a cloud controller manager
	// for the tenant in its host namespace, which makes a host LoadBalancer Service in
	// that namespace for each, sending traffic to the tenant's worker VMs.
	// externalTrafficPolicy Local keeps the client's address.
	// +optional
	LoadBalancer LoadBalancerProviderSpec `json:"loadBalancer,omitempty,omitzero"`

	// storage gives the tenant PersistentVolumes kept on the host: knest runs a CSI
	// driver (csi.knest.dev) whose controller, on the host in the tenant's namespace,
	// makes a host PersistentVolumeClaim for each tenant volume and hot-plugs it
	// into the worker VM of the pod that uses it (KubeVirt's volume hotplug). The
	// data outlives pods, nodes and VMs.
	// +optional
	Storage StorageProviderSpec `json:"storage,omitempty,omitzero"`
}

// StorageProviderSpec configures the tenant's volumes.
// +kubebuilder:validation:XValidation:rule="!has(self.classes) || self.classes.filter(c, has(c.default) && c.default).size() <= 1",message="at most one tenant StorageClass can be the default"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && self.disabled && has(self.classes) && size(self.classes) > 0)",message="storage.classes need the storage provider: leave out storage.disabled or the classes"
type StorageProviderSpec struct {
	// disabled runs no CSI driver for the tenant: its PersistentVolumeClaims stay
	// Pending. For a host without KubeVirt's volume hotplug. It cannot change after
	// creation: the tenant's volumes depend on the driver.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// classes are the tenant's StorageClasses, each backed by a host StorageClass.
	// Unset: one class, "knest", of the host's default StorageClass, which is the
	// tenant's default. A class removed here stays in the tenant.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Classes []TenantStorageClass `json:"classes,omitempty"`
}

// TenantStorageClass is one tenant StorageClass.
type TenantStorageClass struct {
	// name of the StorageClass in the tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="a StorageClass name is lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. fast-ssd"
	Name string `json:"name"`

	// hostStorageClassName is the host StorageClass of its volumes' host claims.
	// Unset: the host's default StorageClass.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	HostStorageClassName string `json:"hostStorageClassName,omitempty"`

	// default marks the tenant's default StorageClass (at most one).
	// +optional
	Default bool `json:"default,omitempty"`
}

// LoadBalancerProviderSpec configures the tenant's load balancers.
type LoadBalancerProviderSpec struct {
	// disabled runs no cloud controller manager for the tenant: its LoadBalancer
	// Services stay without an address, and no host Service is made for them. For a
	// host without a load balancer implementation. Turning it off deletes the host
	// Services made so far.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// BackupSpec schedules etcd snapshots.
// +kubebuilder:validation:XValidation:rule="(has(self.storageClassName) == has(oldSelf.storageClassName)) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="backup.storageClassName cannot change after creation: the backup volume is made once"
// +kubebuilder:validation:XValidation:rule="(has(self.size) == has(oldSelf.size)) && (!has(self.size) || self.size == oldSelf.size)",message="backup.size cannot change after creation: the backup volume is made once"
type BackupSpec struct {
	// interval between scheduled snapshots, at least 5m, e.g. 1h or 24h; 0s takes
	// none on a schedule (`knest backup` still takes one).
	// +kubebuilder:default="1h0m0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('5m')",message="backup.interval must be 0s (no schedule) or at least 5m, e.g. 1h"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// keep is how many snapshots are kept; the oldest go first.
	// +kubebuilder:default=24
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	// +optional
	Keep int32 `json:"keep,omitempty"`

	// storageClassName of the backup volume; empty means the host's default class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// size of the backup volume; it must hold keep snapshots, each at most etcd's
	// quota (three quarters of controlPlane.etcd.size) and usually far less.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1Gi')) >= 0 && quantity(string(self)).compareTo(quantity('1Ti')) <= 0",message="backup.size must be from 1Gi to 1Ti, e.g. 10Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// MachineSpec is the VM shape shared by control-plane nodes and pool nodes.
type MachineSpec struct {
	// cpu is the number of virtual CPU cores.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +optional
	CPU int32 `json:"cpu,omitempty"`

	// memory is the VM's memory, e.g. 4Gi. It is also requested from the host scheduler.
	// +kubebuilder:default="4Gi"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="memory must be a quantity such as 4Gi or 4096Mi (suffixes Ki, Mi, Gi, Ti; 4GB is not a quantity)"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// image is the node image: a containerDisk image reference (see images/). Empty
	// means knest's node image for spec.version from the controller's image repository.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || (self.matches('^((?:[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\\\\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*|\\\\[[a-fA-F0-9:]+\\\\])(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$') && !self.matches('^[a-f0-9]{64}$'))",message="image must be a container image reference as the kubelet parses it, [registry[:port]/]path[:tag][@sha256:digest] with a lower-case path, e.g. quay.io/example/node:v1.35.4"
	// +optional
	Image string `json:"image,omitempty"`

	// rootDisk chooses the root disk kind and its size.
	// +optional
	RootDisk RootDiskSpec `json:"rootDisk,omitempty"`

	// kernelBoot boots the kernel and initrd from a kernel-boot image instead of the
	// disk's bootloader; faster and needed where firmware boot is slow.
	// +optional
	KernelBoot *KernelBootSpec `json:"kernelBoot,omitempty"`

	// nodeDrainTimeoutSeconds bounds how long a node is drained before its VM is
	// removed (scale-down, rollout, remediation). 0 means wait forever.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +optional
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`
}

// RootDiskSpec describes a node's root disk.
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'DataVolume' || has(self.size)",message="rootDisk.size is required when rootDisk.type is DataVolume"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || !isQuantity(string(self.size)) || quantity(string(self.size)).isGreaterThan(quantity('0'))",message="rootDisk.size must be more than 0 and at most 64Ti, e.g. 20Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || !isQuantity(string(self.size)) || quantity(string(self.size)).compareTo(quantity('64Ti')) <= 0",message="rootDisk.size must be more than 0 and at most 64Ti, e.g. 20Gi"
type RootDiskSpec struct {
	// type is ContainerDisk (ephemeral, default) or DataVolume (persistent PVC).
	// +kubebuilder:default=ContainerDisk
	// +optional
	Type RootDiskType `json:"type,omitempty"`

	// size of the DataVolume root disk, e.g. 20Gi.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="rootDisk.size must be a quantity such as 20Gi (suffixes Ki, Mi, Gi, Ti; 20GB is not a quantity)"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of the DataVolume; empty means the host's default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="rootDisk.storageClassName must be a storage class name: a DNS subdomain of at most 253 lower-case letters, digits, '-' and '.', e.g. fast-ssd"
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
}

// KernelBootSpec points at a kernel-boot image (KubeVirt's kernelBoot.container).
type KernelBootSpec struct {
	// image holds the kernel and initrd.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || (self.matches('^((?:[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\\\\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*|\\\\[[a-fA-F0-9:]+\\\\])(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][-A-Za-z0-9_.]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$') && !self.matches('^[a-f0-9]{64}$'))",message="image must be a container image reference as the kubelet parses it, [registry[:port]/]path[:tag][@sha256:digest] with a lower-case path, e.g. quay.io/example/node:v1.35.4"
	Image string `json:"image"`
	// kernelPath inside the image.
	// +kubebuilder:default="/boot/vmlinuz"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(/([^/.][^/]*|\\\\.[^/.][^/]*|\\\\.\\\\.[^/]+))+/?$')",message="kernelBoot paths must be absolute paths to a file in the image without '.', '..' or '//' (KubeVirt refuses others), e.g. /boot/vmlinuz"
	// +optional
	KernelPath string `json:"kernelPath,omitempty"`
	// initrdPath inside the image.
	// +kubebuilder:default="/boot/initrd.img"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(/([^/.][^/]*|\\\\.[^/.][^/]*|\\\\.\\\\.[^/]+))+/?$')",message="kernelBoot paths must be absolute paths to a file in the image without '.', '..' or '//' (KubeVirt refuses others), e.g. /boot/vmlinuz"
	// +optional
	InitrdPath string `json:"initrdPath,omitempty"`
	// kernelArgs is the kernel command line; the default suits knest's node image.
	// +kubebuilder:default="root=LABEL=knest-root ro console=ttyS0"
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	KernelArgs string `json:"kernelArgs,omitempty"`
}

// ControlPlaneMode says where a tenant's control plane runs.
// +kubebuilder:validation:Enum=VM;Hosted
type ControlPlaneMode string

const (
	// ControlPlaneVM runs the control plane in KubeVirt VMs, like the workers: the
	// tenant shares nothing with the host but its hardware.
	ControlPlaneVM ControlPlaneMode = "VM"
	// ControlPlaneHosted runs kube-apiserver, kube-controller-manager, kube-scheduler
	// and etcd as pods on the host (a HostedControlPlane); only the workers are VMs.
	ControlPlaneHosted ControlPlaneMode = "Hosted"
)

// ControlPlaneSpec sizes the control plane.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Hosted' || !has(self.replicas) || self.replicas == 1 || self.replicas == 3",message="a hosted control plane has 1 or 3 API server replicas (controlPlane.replicas)"
// +kubebuilder:validation:XValidation:rule="!has(self.hosted) || (has(self.mode) && self.mode == 'Hosted')",message="controlPlane.hosted needs controlPlane.mode Hosted"
// +kubebuilder:validation:XValidation:rule="!has(self.etcd) || !has(self.etcd.members) || (has(self.mode) && self.mode == 'Hosted')",message="controlPlane.etcd.members needs controlPlane.mode Hosted: a VM control plane runs one etcd member per node (controlPlane.replicas)"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Hosted' || ((!has(self.image) || size(self.image) == 0) && !has(self.kernelBoot) && (!has(self.cpu) || self.cpu == 2) && (!has(self.memory) || !isQuantity(string(self.memory)) || quantity(string(self.memory)).compareTo(quantity('4Gi')) == 0) && (!has(self.rootDisk) || ((!has(self.rootDisk.type) || self.rootDisk.type == 'ContainerDisk') && !has(self.rootDisk.size) && (!has(self.rootDisk.storageClassName) || size(self.rootDisk.storageClassName) == 0))))",message="controlPlane.cpu, memory, image, rootDisk and kernelBoot shape control-plane VMs, and a hosted control plane has none: leave them out, and size its API servers with controlPlane.hosted.resources"
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || self.cpu >= 2",message="controlPlane.cpu must be at least 2: kubeadm refuses to init a control plane with fewer CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !isQuantity(string(self.memory)) || quantity(string(self.memory)).compareTo(quantity('1700Mi')) >= 0",message="controlPlane.memory must be at least 1700Mi: kubeadm refuses to init a control plane with less"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !isQuantity(string(self.memory)) || quantity(string(self.memory)).compareTo(quantity('1Ti')) <= 0",message="memory must be at most 1Ti, e.g. 8Gi: no host node offers more to one VM"
type ControlPlaneSpec struct {
	// replicas is the number of control-plane nodes: 1, 3, 5 or 7. It must be odd so
	// etcd keeps quorum when one member is lost.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self in [1, 3, 5, 7]",message="controlPlane.replicas must be 1, 3, 5 or 7: an even number of etcd members tolerates no more failures than one fewer and risks split votes"
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// mode is where the control plane runs: VM (the default: control-plane nodes are
	// KubeVirt VMs sized by cpu, memory and the other machine fields) or Hosted (pods
	// on the host; the machine fields do not apply). It cannot change after creation.
	// +kubebuilder:default=VM
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="controlPlane.mode cannot be changed after creation: create a new cluster to move its control plane"
	// +optional
	Mode ControlPlaneMode `json:"mode,omitempty"`

	// hosted sizes a hosted control plane.
	// +optional
	Hosted *HostedControlPlaneSpec `json:"hosted,omitempty"`

	// etcd says where the tenant's etcd keeps its data, in either mode: a volume of
	// the host's (the default), so that the tenant's objects outlive the etcd pod or
	// the control-plane VM.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="controlPlane.etcd cannot change after creation: etcd's volume is made once"
	// +optional
	Etcd EtcdSpec `json:"etcd,omitempty,omitzero"`

	MachineSpec `json:",inline"`
}

// HostedControlPlaneSpec sizes a hosted control plane's containers. Each
// resources field is one component's; a value left out keeps knest's default
// (pkg/hosted/defaults.go: a CPU and memory request and a memory limit, no CPU
// limit), and a memory request above the default limit drops that limit.
// kubeadm's containers keep their defaults. All of it is hosted only: a VM control
// plane refuses controlPlane.hosted.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('cpu' in self.resources.limits) || !('cpu' in self.resources.requests) || !isQuantity(string(self.resources.limits['cpu'])) || !isQuantity(string(self.resources.requests['cpu'])) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.resources.requests['cpu']))) >= 0",message="controlPlane.hosted.resources.limits.cpu must be at least its request: the host refuses a pod whose limit is below its request"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('memory' in self.resources.limits) || !('memory' in self.resources.requests) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.resources.requests['memory'])) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.resources.requests['memory']))) >= 0",message="controlPlane.hosted.resources.limits.memory must be at least its request: the host refuses a pod whose limit is below its request"
type HostedControlPlaneSpec struct {
	// resources of each API server replica's kube-apiserver container, e.g.
	// requests: {cpu: 100m, memory: 512Mi}.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// controllerManager sizes kube-controller-manager, beside each kube-apiserver.
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('cpu' in self.resources.limits) || !('cpu' in self.resources.requests) || !isQuantity(string(self.resources.limits['cpu'])) || !isQuantity(string(self.resources.requests['cpu'])) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.resources.requests['cpu']))) >= 0",message="controlPlane.hosted.controllerManager.resources.limits.cpu must be at least its request: the host refuses a pod whose limit is below its request"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('memory' in self.resources.limits) || !('memory' in self.resources.requests) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.resources.requests['memory'])) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.resources.requests['memory']))) >= 0",message="controlPlane.hosted.controllerManager.resources.limits.memory must be at least its request: the host refuses a pod whose limit is below its request"
	// +optional
	ControllerManager HostedComponentSpec `json:"controllerManager,omitempty,omitzero"`

	// scheduler sizes kube-scheduler, beside each kube-apiserver.
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('cpu' in self.resources.limits) || !('cpu' in self.resources.requests) || !isQuantity(string(self.resources.limits['cpu'])) || !isQuantity(string(self.resources.requests['cpu'])) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.resources.requests['cpu']))) >= 0",message="controlPlane.hosted.scheduler.resources.limits.cpu must be at least its request: the host refuses a pod whose limit is below its request"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('memory' in self.resources.limits) || !('memory' in self.resources.requests) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.resources.requests['memory'])) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.resources.requests['memory']))) >= 0",message="controlPlane.hosted.scheduler.resources.limits.memory must be at least its request: the host refuses a pod whose limit is below its request"
	// +optional
	Scheduler HostedComponentSpec `json:"scheduler,omitempty,omitzero"`

	// konnectivityServer sizes the konnectivity server, beside each kube-apiserver.
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('cpu' in self.resources.limits) || !('cpu' in self.resources.requests) || !isQuantity(string(self.resources.limits['cpu'])) || !isQuantity(string(self.resources.requests['cpu'])) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.resources.requests['cpu']))) >= 0",message="controlPlane.hosted.konnectivityServer.resources.limits.cpu must be at least its request: the host refuses a pod whose limit is below its request"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('memory' in self.resources.limits) || !('memory' in self.resources.requests) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.resources.requests['memory'])) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.resources.requests['memory']))) >= 0",message="controlPlane.hosted.konnectivityServer.resources.limits.memory must be at least its request: the host refuses a pod whose limit is below its request"
	// +optional
	KonnectivityServer HostedComponentSpec `json:"konnectivityServer,omitempty,omitzero"`

	// etcd sizes each etcd member's container. Where etcd keeps its data is
	// controlPlane.etcd, fixed at creation; this may change (the members restart
	// one at a time).
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('cpu' in self.resources.limits) || !('cpu' in self.resources.requests) || !isQuantity(string(self.resources.limits['cpu'])) || !isQuantity(string(self.resources.requests['cpu'])) || quantity(string(self.resources.limits['cpu'])).compareTo(quantity(string(self.resources.requests['cpu']))) >= 0",message="controlPlane.hosted.etcd.resources.limits.cpu must be at least its request: the host refuses a pod whose limit is below its request"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.requests) || !('memory' in self.resources.limits) || !('memory' in self.resources.requests) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.resources.requests['memory'])) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.resources.requests['memory']))) >= 0",message="controlPlane.hosted.etcd.resources.limits.memory must be at least its request: the host refuses a pod whose limit is below its request"
	// +optional
	Etcd HostedComponentSpec `json:"etcd,omitempty,omitzero"`
}

// HostedComponentSpec sizes one container of a hosted control plane.
type HostedComponentSpec struct {
	// resources of the container, e.g. requests: {memory: 128Mi}, limits: {memory: 512Mi}.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// EtcdSpec is where etcd keeps its data, and a hosted etcd's size.
// +kubebuilder:validation:XValidation:rule="!has(self.ephemeral) || !self.ephemeral || (!has(self.storageClassName) && !has(self.size))",message="controlPlane.etcd.ephemeral keeps etcd off any volume: it cannot have a storageClassName or size too"
// +kubebuilder:validation:XValidation:rule="!has(self.ephemeral) || !self.ephemeral || !has(self.members) || self.members == 1",message="controlPlane.etcd.ephemeral has one member: a member that restarts on an empty directory cannot rejoin the others"
type EtcdSpec struct {
	// members of a hosted etcd: 1 (the default) or 3, which keeps the tenant's API
	// writable while one member is lost or replaced (each member has its own volume).
	// A VM control plane runs one member per control-plane node (replicas).
	// +kubebuilder:validation:XValidation:rule="self == 1 || self == 3",message="controlPlane.etcd.members must be 1 or 3: three members keep quorum when one is lost"
	// +optional
	Members int32 `json:"members,omitempty"`

	// storageClassName of etcd's volume (a hosted etcd's claim, a control-plane
	// VM's etcd disk); empty means the host's default class. The class must keep
	// data across a host node's restart (docs/reference.md#what-survives-what).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="controlPlane.etcd.storageClassName must be a storage class name: a DNS subdomain of at most 253 lower-case letters, digits, '-' and '.', e.g. fast-ssd"
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// size of etcd's volume; etcd's quota is three quarters of it.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1Gi')) >= 0 && quantity(string(self)).compareTo(quantity('64Gi')) <= 0",message="controlPlane.etcd.size must be from 1Gi to 64Gi, e.g. 4Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// ephemeral keeps etcd off any volume: on an emptyDir (hosted) or the VM's
	// container disk. The tenant's objects are then lost with the etcd pod or VM (a
	// host node restart, an eviction, a crash). For throwaway tenants only;
	// condition EtcdPersistent says so.
	// +optional
	Ephemeral bool `json:"ephemeral,omitempty"`
}

// WorkerPool is a named group of identical worker nodes.
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !isQuantity(string(self.memory)) || quantity(string(self.memory)).compareTo(quantity('1Gi')) >= 0",message="a worker pool's memory must be at least 1Gi for kubelet, a runtime and the CNI to fit"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !isQuantity(string(self.memory)) || quantity(string(self.memory)).compareTo(quantity('1Ti')) <= 0",message="memory must be at most 1Ti, e.g. 8Gi: no host node offers more to one VM"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.replicas)",message="an autoscaled pool takes no replicas: the autoscaler sizes it between autoscaling.minReplicas and maxReplicas; leave replicas out"
type WorkerPool struct {
	// name of the pool: a DNS label of at most 15 characters, unique in the cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="pool name must be a DNS label: lower-case letters, digits and '-', starting with a letter and not ending with '-'"
	// +kubebuilder:validation:XValidation:rule="self != 'cp'",message="pool name cp is reserved: the control plane's objects are named <cluster>-cp; pick another, e.g. gpu"
	Name string `json:"name"`

	// replicas is the number of nodes; 0 keeps the pool defined but empty. Unset
	// means 1, or, for an autoscaled pool, whatever the autoscaler decides.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling lets the tenant's cluster-autoscaler size the pool between
	// minReplicas and maxReplicas, by its pending pods and idle nodes. An autoscaled
	// pool takes no replicas of its own.
	// +optional
	Autoscaling *PoolAutoscaling `json:"autoscaling,omitempty"`

	MachineSpec `json:",inline"`

	// version holds the pool at an older Kubernetes version than spec.version, e.g.
	// while its workloads are checked against the new control plane; empty means
	// spec.version. At most 3 minors older than spec.version, never newer.
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:XValidation:rule="self.matches('^v1\\\\.(3[0-6])\\\\.(0|[1-9][0-9]{0,3})$')",message="version must look like v1.MINOR.PATCH with a minor from 30 to 36 (the range Cluster API v1.13 supports), e.g. v1.35.4"
	// +optional
	Version string `json:"version,omitempty"`

	// labels are set on the pool's tenant Nodes (kubelet's --node-labels, which
	// Cluster API takes as at most 1024 characters of key=value,...; the CLI checks
	// that length, the API server cannot within its CEL cost budget). Keys in the kubernetes.io and k8s.io
	// namespaces are refused, as kubelet refuses them, except under
	// node.kubernetes.io/, kubelet.kubernetes.io/ and topology.kubernetes.io/.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="label keys must be qualified names: an optional DNS-name prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. example.com/gpu"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes|k8s)\\\\.io/') || k.matches('^(node|kubelet|topology)\\\\.kubernetes\\\\.io/'))",message="label keys in the kubernetes.io and k8s.io namespaces (node-role.kubernetes.io/ too) are refused by kubelet, except under node.kubernetes.io/, kubelet.kubernetes.io/ and topology.kubernetes.io/; use a prefix of your own, e.g. example.com/role"
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// taints are set on the pool's tenant Nodes when they register.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Taints []Taint `json:"taints,omitempty"`

	// gpus are passed through to every VM of the pool (KubeVirt's GPU device plugin names).
	// +kubebuilder:validation:MaxItems=8
	// +optional
	GPUs []DeviceSpec `json:"gpus,omitempty"`

	// hostDevices are other host devices passed through to every VM of the pool.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	HostDevices []DeviceSpec `json:"hostDevices,omitempty"`
}

// AutoscalerSpec tunes the tenant's cluster-autoscaler (its flags of the same names).
type AutoscalerSpec struct {
	// scaleDownUnneededTime is how long a node must be unneeded before it is
	// drained and removed (default 10m).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="autoscaler.scaleDownUnneededTime must be from 10s to 24h, e.g. 10m"
	// +optional
	ScaleDownUnneededTime *metav1.Duration `json:"scaleDownUnneededTime,omitempty"`

	// scaleDownDelayAfterAdd is how long after a scale-up scale-down resumes
	// (default 10m).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="autoscaler.scaleDownDelayAfterAdd must be from 0s to 24h, e.g. 10m"
	// +optional
	ScaleDownDelayAfterAdd *metav1.Duration `json:"scaleDownDelayAfterAdd,omitempty"`
}

// PoolAutoscaling bounds an autoscaled pool.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must be at most autoscaling.maxReplicas, e.g. 0 and 3"
type PoolAutoscaling struct {
	// minReplicas is the fewest nodes the autoscaler keeps; 0 lets an idle pool go
	// empty (scale from zero).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	MinReplicas int32 `json:"minReplicas"`
	// maxReplicas is the most nodes the autoscaler adds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MaxReplicas int32 `json:"maxReplicas"`
}

// LabelValue is a Kubernetes label value. A type of its own so that the API server
// knows its length, which keeps the CEL rules on it within their cost budget.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="label values must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (no ',' or '='), e.g. a10"
type LabelValue string

// Taint is set on a pool's tenant Nodes when they register (kubeadm's
// nodeRegistration.taints). Like corev1.Taint without timeAdded, with limits.
type Taint struct {
	// key is a qualified name, e.g. example.com/gpu.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="taint keys must be qualified names: an optional DNS-name prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. example.com/gpu"
	Key string `json:"key"`
	// value is optional, e.g. true.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="taint values must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. true"
	// +optional
	Value string `json:"value,omitempty"`
	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	// +kubebuilder:validation:XValidation:rule="self in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']",message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute"
	Effect corev1.TaintEffect `json:"effect"`
}

// DeviceSpec names one passthrough device.
type DeviceSpec struct {
	// name of the device inside the VM.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// deviceName is the resource name the host advertises, e.g. nvidia.com/GA102GL_A10.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.indexOf('/') <= 244 && !self.contains('kubernetes.io/')",message="deviceName must be an extended resource name as the kubelet takes it: a DNS-name prefix of at most 244 characters (not kubernetes.io), '/', then at most 63 letters, digits, '-', '_' or '.', e.g. nvidia.com/GA102GL_A10"
	DeviceName string `json:"deviceName"`
}

// NetworkSpec is the tenant's network layout.
// +kubebuilder:validation:XValidation:rule="!has(self.podCIDR) || !has(self.serviceCIDR) || !isCIDR(self.podCIDR) || !isCIDR(self.serviceCIDR) || (!cidr(self.podCIDR).containsIP(cidr(self.serviceCIDR).masked().ip()) && !cidr(self.serviceCIDR).containsIP(cidr(self.podCIDR).masked().ip()))",message="network.podCIDR and network.serviceCIDR must not overlap"
type NetworkSpec struct {
	// podCIDR is the tenant's pod network (IPv4, prefix /8 to /24).
	// +kubebuilder:default="10.243.0.0/16"
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self).prefixLength() >= 8 && cidr(self).prefixLength() <= 24",message="network.podCIDR must be an IPv4 CIDR with a prefix from /8 to /24, e.g. 10.243.0.0/16"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network.podCIDR cannot be changed after creation; create a new cluster instead"
	// +optional
	PodCIDR string `json:"podCIDR,omitempty"`

	// serviceCIDR is the tenant's service network (IPv4, prefix /12 to /24).
	// +kubebuilder:default="10.95.0.0/16"
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self).prefixLength() >= 12 && cidr(self).prefixLength() <= 24",message="network.serviceCIDR must be an IPv4 CIDR with a prefix from /12 to /24, e.g. 10.95.0.0/16"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network.serviceCIDR cannot be changed after creation; create a new cluster instead"
	// +optional
	ServiceCIDR string `json:"serviceCIDR,omitempty"`

	// dnsDomain is the tenant's cluster DNS domain, distinct from the host's
	// cluster.local so names never resolve across.
	// +kubebuilder:default="tenant.local"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$')",message="network.dnsDomain must be a DNS name: labels of at most 63 lower-case letters, digits and '-', joined by '.', e.g. tenant.local"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network.dnsDomain cannot be changed after creation; create a new cluster instead"
	// +optional
	DNSDomain string `json:"dnsDomain,omitempty"`

	// cni is the network plugin knest installs into the tenant: flannel (default) or none.
	// +kubebuilder:default=flannel
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network.cni cannot be changed after creation"
	// +optional
	CNI CNI `json:"cni,omitempty"`
}

// ServiceType is how the tenant API Service is exposed on the host.
// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
type ServiceType string

const (
	ServiceTypeClusterIP    ServiceType = "ClusterIP"
	ServiceTypeNodePort     ServiceType = "NodePort"
	ServiceTypeLoadBalancer ServiceType = "LoadBalancer"
)

// APIServerSpec says how the tenant API endpoint is reached.
// +kubebuilder:validation:XValidation:rule="has(self.host) == has(oldSelf.host) && (!has(self.host) || self.host == oldSelf.host)",message="apiServer.host cannot be changed after creation: it is in the tenant's certificates and kubeconfigs"
type APIServerSpec struct {
	// serviceType of the host Service in front of the control plane.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="apiServer.serviceType cannot be changed after creation: the endpoint is baked into the tenant's certificates and kubeconfigs"
	// +optional
	ServiceType ServiceType `json:"serviceType,omitempty"`

	// host is a fixed endpoint host (DNS name or IP) for the tenant API, e.g. one a
	// load balancer outside the host cluster answers on. It cannot change after creation.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) || self.matches('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$')",message="apiServer.host must be a DNS name or an IP address, e.g. api.tenant.example.com or 192.0.2.10"
	// +optional
	Host string `json:"host,omitempty"`

	// certSANs are extra names and IPs in the API server's certificate.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(s, isIP(s) || s.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$'))",message="apiServer.certSANs must be DNS names (a leading *. is allowed) or IP addresses, e.g. api.tenant.example.com or 192.0.2.10"
	// +optional
	CertSANs []string `json:"certSANs,omitempty"`
}

// NestedClusterStatus is what knest observed.
type NestedClusterStatus struct {
	// phase is a one-word summary.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// conditions tell what is and is not ready, with reasons.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// endpoint is the tenant API server URL as seen from the host cluster.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// version is the Kubernetes version the control plane runs (the oldest of its
	// machines while an upgrade rolls).
	// +optional
	Version string `json:"version,omitempty"`

	// controlPlane counts control-plane nodes.
	// +optional
	ControlPlane ReplicaStatus `json:"controlPlane,omitempty"`

	// workers counts nodes per pool.
	// +listType=map
	// +listMapKey=name
	// +optional
	Workers []PoolStatus `json:"workers,omitempty"`

	// controlPlaneReady is "ready/desired" for the control plane, for kubectl columns.
	// +optional
	ControlPlaneReady string `json:"controlPlaneReady,omitempty"`

	// workersReady is "ready/desired" over all pools, for kubectl columns.
	// +optional
	WorkersReady string `json:"workersReady,omitempty"`

	// kubeconfigSecretName is the Secret (key "value") with the tenant admin kubeconfig.
	// +optional
	KubeconfigSecretName string `json:"kubeconfigSecretName,omitempty"`

	// tenantID is the UID of the tenant's kube-system namespace when knest first
	// reached its API: a control plane that answers with another one came back
	// blank (condition TenantState).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TenantID string `json:"tenantID,omitempty"`

	// backup tells which snapshots exist and how the last restore went.
	// +optional
	Backup BackupStatus `json:"backup,omitempty,omitzero"`
}

// BackupStatus is what the backup volume holds.
type BackupStatus struct {
	// lastSnapshot is the newest snapshot taken and checked.
	// +optional
	LastSnapshot *Snapshot `json:"lastSnapshot,omitempty"`

	// lastFailure is why the newest backup Job failed, when it failed after
	// lastSnapshot was taken; empty otherwise.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastFailure string `json:"lastFailure,omitempty"`

	// snapshots are the names of the snapshots on the backup volume, oldest first:
	// what `knest restore --from` takes.
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	// +optional
	Snapshots []string `json:"snapshots,omitempty"`

	// restore is the restore asked for with the knest.dev/restore-from annotation,
	// or the last one done.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`
}

// Snapshot is one etcd snapshot on the backup volume.
type Snapshot struct {
	// name of the snapshot file, e.g. 20261127T091500Z.db.
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// takenAt is when the snapshot was taken.
	TakenAt metav1.Time `json:"takenAt"`
	// revision is etcd's revision in the snapshot.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// sizeBytes is the snapshot file's size.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

// RestoreStatus is a restore's progress.
type RestoreStatus struct {
	// snapshot restored from.
	// +kubebuilder:validation:MaxLength=64
	Snapshot string `json:"snapshot"`
	// phase is Running, Succeeded or Failed.
	// +kubebuilder:validation:Enum=Running;Succeeded;Failed
	Phase RestorePhase `json:"phase"`
	// message says what the restore waits for, or why it failed.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// startedAt is when the restore began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// finishedAt is when it succeeded or failed.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// RestorePhase is where a restore is.
type RestorePhase string

// Restore phases.
const (
	RestoreRunning   RestorePhase = "Running"
	RestoreSucceeded RestorePhase = "Succeeded"
	RestoreFailed    RestorePhase = "Failed"
)

// RestoreFromAnnotation on a NestedCluster asks knest to bring the tenant's etcd
// back to the named snapshot of status.backup.snapshots (`knest restore` sets
// it); knest removes it when the restore has succeeded or failed
// (status.backup.restore says which).
const RestoreFromAnnotation = "knest.dev/restore-from"

// ReplicaStatus counts desired and ready nodes.
type ReplicaStatus struct {
	// desired is the number of nodes the spec asks for.
	// +optional
	Desired int32 `json:"desired,omitempty"`
	// ready is the number of nodes that are ready.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// current is the number of machines that exist, including those still being
	// created and those being drained and removed.
	// +optional
	Current int32 `json:"current,omitempty"`
	// upToDate is the number of machines at the current spec (version and VM shape);
	// less than current while Cluster API rolls machines.
	// +optional
	UpToDate int32 `json:"upToDate,omitempty"`
}

// PoolStatus counts one pool's nodes.
type PoolStatus struct {
	Name string `json:"name"`
	// version is the Kubernetes version the pool's machines are rolled to: spec.version
	// or the version the pool is held at.
	// +optional
	Version string `json:"version,omitempty"`
	// newMachinesBlocked says why Cluster API creates no machines for the pool (no
	// scale-up, no replacement of an unhealthy machine, no rollout of a changed
	// shape); empty when it does. Condition WorkersScalable says the same.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	NewMachinesBlocked string `json:"newMachinesBlocked,omitempty"`
	// autoscaling is the pool's bounds while the autoscaler sizes it; desired is
	// then the autoscaler's choice.
	// +optional
	Autoscaling   *PoolAutoscaling `json:"autoscaling,omitempty"`
	ReplicaStatus `json:",inline"`
}

// NestedCluster is a tenant Kubernetes cluster whose nodes are KubeVirt VMs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nc;ncl,categories=knest
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Control Plane",type=string,JSONPath=`.status.controlPlaneReady`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workersReady`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 30 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="NestedCluster name must be a DNS label of at most 30 characters (lower-case letters, digits, '-', starting with a letter): it prefixes the names of the VMs and Services knest creates"
type NestedCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	Spec   NestedClusterSpec   `json:"spec,omitempty"`
	Status NestedClusterStatus `json:"status,omitempty"`
}

// NestedClusterList is a list of NestedClusters.
//
// +kubebuilder:object:root=true
type NestedClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NestedCluster `json:"items"`
}

// GetConditions returns the conditions; Cluster API's patch helper and conditions
// utilities use it.
func (c *NestedCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions.
func (c *NestedCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

func init() {
	SchemeBuilder.Register(&NestedCluster{}, &NestedClusterList{})
}

// IsHosted reports whether the control plane runs as pods on the host.
func (s ControlPlaneSpec) IsHosted() bool { return s.Mode == ControlPlaneHosted }

// ReplicasOrDefault is the pool's replicas, 1 when unset (as the field documents).
// An autoscaled pool has none of its own: the autoscaler sizes it.
func (p WorkerPool) ReplicasOrDefault() int32 {
	if p.Replicas == nil {
		return 1
	}
	return *p.Replicas
}
