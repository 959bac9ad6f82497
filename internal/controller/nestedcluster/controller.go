// Package nestedcluster is the NestedCluster controller: it renders each
// NestedCluster into Cluster API objects (pkg/cluster), applies them, removes what
// the spec no longer asks for, and summarizes Cluster API's progress back into the
// NestedCluster's status.
package nestedcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/pkg/cluster"
)

// The controller's permissions on the host cluster (config/rbac is generated from these).
// +kubebuilder:rbac:groups=knest.dev,resources=nestedclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=knest.dev,resources=nestedclusters/status;nestedclusters/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machinedeployments;machinehealthchecks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinesets,verbs=get;list
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=controlplane.knest.dev,resources=hostedcontrolplanes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigtemplates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=get;list
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtclusters;kubevirtmachinetemplates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list
// +kubebuilder:rbac:groups=addons.cluster.x-k8s.io,resources=clusterresourcesets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=knest-system

// FieldOwner is the server-side apply field manager of everything knest writes.
const FieldOwner = "knest"

// Reconciler reconciles NestedClusters.
type Reconciler struct {
	Client client.Client
	// APIReader reads uncached; used only to find out whether an old template is
	// still in use, which needs objects the controller does not otherwise watch.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Render holds controller-wide rendering settings (node image repository,
	// CAPK bootstrap check).
	Render cluster.Options
	// Tenants reads a tenant's identity through its API, so that a control plane
	// that came back blank is reported; nil reads nothing.
	Tenants tenant.Reader
	// Self is the controller's own identity, to which it binds ClusterRole
	// knest-tenant in each tenant namespace (see access.go).
	Self rbacv1.Subject
	// TenantCheckInterval is how often an initialized cluster's identity is read
	// again when nothing else brings it back; 0 leaves it to watched objects.
	TenantCheckInterval time.Duration
}

// SetupWithManager registers the controller. It watches every kind it creates, so
// Cluster API's progress (status of the control plane and deployments) and any
// deletion of an owned object bring the NestedCluster back to reconcile. The
// KubevirtCluster and KubeadmControlPlane are owned by the Cluster too, so those
// watches match every owner, not only the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&knestv1.NestedCluster{}).
		Owns(&clusterv1.Cluster{}).
		Owns(&capkv1.KubevirtCluster{}, builder.MatchEveryOwner).
		Owns(&capkv1.KubevirtMachineTemplate{}).
		Owns(&controlplanev1.KubeadmControlPlane{}, builder.MatchEveryOwner).
		Owns(&hcpv1.HostedControlPlane{}, builder.MatchEveryOwner).
		Owns(&bootstrapv1.KubeadmConfigTemplate{}).
		Owns(&clusterv1.MachineDeployment{}).
		Owns(&clusterv1.MachineHealthCheck{}).
		Owns(&addonsv1.ClusterResourceSet{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.Deployment{}). // the autoscaler's, for condition AutoscalerReady
		Watches(&kubevirtv1.VirtualMachineInstance{}, vmsOfNestedCluster, builder.WithPredicates(vmPlacementChanged)).
		WithOptions(options)
	return tenant.WatchNamespaces(b, r.Client).Complete(r)
}

// scope is what one reconcile read and decided.
type scope struct {
	nc *knestv1.NestedCluster
	// graph is the desired Cluster API objects; nil on the delete path.
	graph *cluster.Graph
	// observed Cluster API objects; nil when absent.
	cluster      *clusterv1.Cluster
	controlPlane *controlPlaneState
	pools        map[string]*clusterv1.MachineDeployment
	// autoscaler is the tenant's cluster-autoscaler Deployment; nil when no pool
	// is autoscaled.
	autoscaler *appsv1.Deployment
	// cloudControllerManager is the tenant's load-balancer provider's Deployment;
	// nil when it is turned off.
	cloudControllerManager *appsv1.Deployment
	// csiController is the tenant's CSI driver's controller Deployment; nil when
	// storage is turned off.
	csiController *appsv1.Deployment
	// vms are the tenant's VMIs, for conditions HostSpread, LiveMigratable and
	// HostNodesReady, and the VMs no host node can take (WorkersReady,
	// ControlPlaneReady).
	vms []kubevirtv1.VirtualMachineInstance
	// hostNodes says, for each host node a VMI is on, why it is not ready ("" when
	// it is), for condition HostNodesReady.
	hostNodes map[string]string
	// heldVersion is the version still rolling out while spec.version asks for
	// another (see heldVersion); empty when none is held.
	heldVersion string
	// tenant is what the tenant's API said of its identity; nil when not asked.
	tenant *tenantState
}

// Reconcile brings one NestedCluster's Cluster API graph in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	nc := &knestv1.NestedCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			setPhase(req.NamespacedName, "")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Persist the finalizer before creating anything, so nothing can be left behind.
	if nc.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, nc, knestv1.Finalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(nc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{nc: nc}
	previous := nc.Status.Phase
	defer func() {
		applyErr := applyError(nc, reterr)
		summarize(nc, s, applyErr)
		r.recordPhase(nc, previous)
		recordMetrics(nc, previous, s, applyErr)
		if applyErr != nil && r.Recorder != nil {
			r.Recorder.Event(nc, corev1.EventTypeWarning, knestv1.ApplyFailedReason, applyErr.Error())
		}
		opts := []patch.Option{patch.WithOwnedConditions{Conditions: ownedConditions}}
		// Failed is a verdict on this generation: waits end on it, so it is observed.
		if reterr == nil || nc.Status.Phase == knestv1.PhaseFailed {
			opts = append(opts, patch.WithStatusObservedGeneration{})
		}
		// Reported, not retried: the namespace watch brings it back once labelled.
		if errors.As(reterr, new(*tenant.NamespaceNotEnabledError)) {
			reterr = nil
		}
		// A NestedCluster deleted meanwhile has no status left to patch.
		if err := helper.Patch(ctx, nc, opts...); err != nil && (!apierrors.IsNotFound(err) || nc.DeletionTimestamp.IsZero()) {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("failed to patch NestedCluster status: %w", err)})
		}
	}()

	if !nc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if err := r.reconcileNormal(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// A control plane can lose its state with nothing Cluster API watches changing.
	if s.tenant != nil {
		return ctrl.Result{RequeueAfter: r.TenantCheckInterval}, nil
	}
	return ctrl.Result{}, nil
}

// applyError is what of a reconcile's error status reports as a failure to bring
// the graph in line with the spec: nothing on the delete path, which reports the
// deletion instead, nor a failure to read back what Cluster API reports.
func applyError(nc *knestv1.NestedCluster, err error) error {
	if !nc.DeletionTimestamp.IsZero() || errors.As(err, new(*observeError)) {
		return nil
	}
	return err
}

func (r *Reconciler) recordPhase(nc *knestv1.NestedCluster, previous knestv1.Phase) {
	if nc.Status.Phase == previous || r.Recorder == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if nc.Status.Phase == knestv1.PhaseFailed {
		eventType = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(nc, eventType, string(nc.Status.Phase), "Phase %s: %s", nc.Status.Phase, readyMessage(nc))
}
