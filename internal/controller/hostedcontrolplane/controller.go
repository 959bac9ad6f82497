// Package hostedcontrolplane is knest's Cluster API control-plane provider for
// hosted control planes: it keeps a HostedControlPlane's host objects (pkg/hosted)
// in line with its spec, makes the cluster's certificates and kubeconfig Secret the
// way KubeadmControlPlane does (Cluster API's util/secret and util/kubeconfig), and
// reports the contract's status fields, so that Cluster API, CABPK and CAPK bring
// up the worker VMs unchanged.
//
// The files follow KubeadmControlPlane's split: this one sets the controller up and
// runs the steps of a reconcile; certs.go, etcd.go and bootstrap_job.go hold the
// steps of their concern, status.go what the status says.
package hostedcontrolplane

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/apply"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
)

// +kubebuilder:rbac:groups=controlplane.knest.dev,resources=hostedcontrolplanes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=controlplane.knest.dev,resources=hostedcontrolplanes/status;hostedcontrolplanes/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=addons.cluster.x-k8s.io,resources=clusterresourcesets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes;nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=create;delete

// fieldOwner is the server-side apply field manager of the host objects.
const fieldOwner = "knest-hosted-control-plane"

// How soon to look again for what no watched object reports.
const (
	// clusterIPRequeue: the API server's Service has no cluster IP yet.
	clusterIPRequeue = 10 * time.Second
	// storageClassRequeue: StorageClasses are not watched; a default one may appear.
	storageClassRequeue = 30 * time.Second
)

// applier applies the host objects, which the HostedControlPlane controls. ReadBack:
// the reconcile reads what the server has (the Service's clusterIP, the
// StatefulSet's, Deployment's and Job's status) from the objects it applied.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, FieldOwner: fieldOwner, ReadBack: true}
}

// Reconciler reconciles HostedControlPlanes.
type Reconciler struct {
	Client client.Client
	// APIReader reads what is not cached: etcd's pods, volumes and their nodes,
	// while a member is not ready (Client when nil).
	APIReader client.Reader
	// ToolImage is the knest image, which the Job that replaces an etcd member runs.
	ToolImage string
	// StrandedAfter: DefaultStrandedAfter when 0.
	StrandedAfter time.Duration
	// HostSlowdown stretches the time control-plane pods have to start (see
	// hosted.Input.HostSlowdown).
	HostSlowdown int
}

// SetupWithManager registers the controller; every host object it makes is owned
// by the HostedControlPlane, so their changes (a pod ready, a Job done) come back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hcpv1.HostedControlPlane{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Service{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToControlPlane)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.etcdClaimToControlPlane)).
		WithOptions(options).
		Complete(r)
}

// clusterToControlPlane maps a Cluster to its HostedControlPlane (pause, owner
// references set).
func clusterToControlPlane(_ context.Context, o client.Object) []ctrl.Request {
	c, ok := o.(*clusterv1.Cluster)
	if !ok || c.Spec.ControlPlaneRef.Kind != "HostedControlPlane" || c.Spec.ControlPlaneRef.APIGroup != hcpv1.GroupVersion.Group {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}}
}

// etcdClaimToControlPlane maps a claim of etcd's, which the StatefulSet controller
// makes, to the HostedControlPlane that adopts it: nothing else may change by then
// (etcd not ready yet is no event).
func (r *Reconciler) etcdClaimToControlPlane(ctx context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" || !hosted.IsEtcdClaim(name, o.GetName()) {
		return nil
	}
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, c); err != nil {
		return nil
	}
	return clusterToControlPlane(ctx, c)
}

// Reconcile brings one HostedControlPlane's host objects in line with its spec and
// reports what they do.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	hcp := &hcpv1.HostedControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, hcp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deletion needs nothing of the controller: everything it made is owned by the
	// HostedControlPlane and goes with it (etcd's volume with its StatefulSet).
	if !hcp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	c, err := util.GetOwnerCluster(ctx, r.Client, hcp.ObjectMeta)
	if err != nil || c == nil {
		// Cluster API sets the owner reference; it brings the object back.
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, c, hcp); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	helper, err := patch.NewHelper(hcp, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		setObservedGeneration(hcp, reterr)
		if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{hcpv1.AvailableCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("failed to patch HostedControlPlane: %w", err)})
		}
	}()
	requeueAfter, err := r.reconcileNormal(ctx, newScope(hcp, c))
	if err != nil {
		setReconcileFailed(hcp, err)
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter}, nil
}

// scope is what one reconcile has read and rendered, filled in by the steps in
// their order.
type scope struct {
	hcp     *hcpv1.HostedControlPlane
	cluster *clusterv1.Cluster
	// owner is the HostedControlPlane as the controller of Cluster API's Secrets.
	owner metav1.OwnerReference
	// in renders the host objects; its ServiceIP is set by reconcileService, its
	// etcd fields by reconcileEtcdStorage and renderEtcd.
	in hosted.Input
	// configHash covers the version and kubeadm's configuration: the API server
	// pods and kubeadm's Job are made anew when it changes.
	configHash string
	etcd       *appsv1.StatefulSet
	etcdSvc    *corev1.Service
	apiServers *appsv1.Deployment
}

func newScope(hcp *hcpv1.HostedControlPlane, c *clusterv1.Cluster) *scope {
	return &scope{
		hcp: hcp, cluster: c,
		owner: *metav1.NewControllerRef(hcp, hcpv1.GroupVersion.WithKind("HostedControlPlane")),
	}
}

// A step brings one concern in line. With wait the reconcile ends there, waiting
// for something (Available says what, where someone can act on it); requeueAfter is
// how soon to look again when no watched object will say (0: when one does), the
// soonest of the steps' when none waits.
type step func(ctx context.Context, s *scope) (stepResult, error)

type stepResult struct {
	wait         bool
	requeueAfter time.Duration
}

// reconcileNormal runs the steps in order: each needs what those before it made
// (the Service's address, etcd's volume, the policies before the pods they are
// for, an API server at the spec's version before kubeadm's phases), and the
// control plane is initialized once all went through.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (requeueAfter time.Duration, err error) {
	for _, run := range []step{
		r.reconcileCertificates,
		r.reconcileService,
		r.reconcileKubeconfig,
		r.reconcileKubeadmConfig,
		r.reconcileEtcdStorage,
		r.reconcileEtcdCertificates,
		renderEtcd,
		r.reconcilePolicies,
		r.reconcileKonnectivity,
		r.reconcileEtcd,
		r.adoptEtcdClaims,
		r.reconcileEtcdMembers,
		r.reconcileAPIServers,
		waitForControlPlane,
		r.reconcileBootstrapJob,
	} {
		res, err := run(ctx, s)
		if err != nil {
			return 0, err
		}
		if res.wait {
			return res.requeueAfter, nil
		}
		if res.requeueAfter > 0 && (requeueAfter == 0 || res.requeueAfter < requeueAfter) {
			requeueAfter = res.requeueAfter
		}
	}
	setInitialized(s.hcp)
	return requeueAfter, nil
}

// reconcileService applies the API server's Service; its address is the endpoint
// Cluster API reads, and the one the kubeconfig and kubeadm's configuration name.
func (r *Reconciler) reconcileService(ctx context.Context, s *scope) (stepResult, error) {
	svc := hosted.Service(s.hcp, s.cluster.Name)
	if _, err := r.applier().Apply(ctx, s.hcp, svc); err != nil {
		return stepResult{}, err
	}
	if svc.Spec.ClusterIP == "" {
		return stepResult{wait: true, requeueAfter: clusterIPRequeue}, nil
	}
	s.in = hosted.Input{HCP: s.hcp, Cluster: s.cluster.Name, ServiceIP: svc.Spec.ClusterIP, HostSlowdown: r.HostSlowdown}
	s.hcp.Spec.ControlPlaneEndpoint = s.in.Endpoint()
	return stepResult{}, nil
}

// reconcileKubeadmConfig applies kubeadm's configuration, which the API server
// pods and kubeadm's Job read.
func (r *Reconciler) reconcileKubeadmConfig(ctx context.Context, s *scope) (stepResult, error) {
	cm, err := s.in.KubeadmConfig()
	if err != nil {
		return stepResult{}, err
	}
	if _, err := r.applier().Apply(ctx, s.hcp, cm); err != nil {
		return stepResult{}, err
	}
	s.configHash, err = cluster.ContentHash([]string{s.hcp.Spec.Version, cm.Data["kubeadm.yaml"]})
	return stepResult{}, err
}

// reconcilePolicies applies the NetworkPolicies and PodDisruptionBudgets, before
// the etcd and API server pods they are for.
func (r *Reconciler) reconcilePolicies(ctx context.Context, s *scope) (stepResult, error) {
	for _, p := range s.in.Policies() {
		if _, err := r.applier().Apply(ctx, s.hcp, p); err != nil {
			return stepResult{}, err
		}
	}
	for _, b := range s.in.DisruptionBudgets() {
		if _, err := r.applier().Apply(ctx, s.hcp, b); err != nil {
			return stepResult{}, err
		}
	}
	return stepResult{}, nil
}

// reconcileKonnectivity applies the konnectivity agent's manifests and the
// ClusterResourceSet that puts them in the tenant.
func (r *Reconciler) reconcileKonnectivity(ctx context.Context, s *scope) (stepResult, error) {
	agent, agentSet, err := s.in.Konnectivity()
	if err != nil {
		return stepResult{}, err
	}
	for _, obj := range []client.Object{agent, agentSet} {
		if _, err := r.applier().Apply(ctx, s.hcp, obj); err != nil {
			return stepResult{}, err
		}
	}
	return stepResult{}, nil
}

// reconcileAPIServers applies the API server pods' Deployment and reports its
// replicas as the contract's.
func (r *Reconciler) reconcileAPIServers(ctx context.Context, s *scope) (stepResult, error) {
	deploy := s.in.Deployment(s.configHash[:16])
	if _, err := r.applier().Apply(ctx, s.hcp, deploy); err != nil {
		return stepResult{}, err
	}
	setReplicas(s.hcp, deploy)
	s.apiServers = deploy
	return stepResult{}, nil
}

// waitForControlPlane stops the reconcile until etcd and an API server at the
// spec's version serve: kubeadm's phases need both.
func waitForControlPlane(_ context.Context, s *scope) (stepResult, error) {
	return stepResult{wait: setWaitingForControlPlane(s.hcp, s.in.EtcdStopped, s.etcd, s.apiServers)}, nil
}
