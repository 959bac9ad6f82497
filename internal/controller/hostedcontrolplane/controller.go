// Package hostedcontrolplane is knest's Cluster API control-plane provider for
// hosted control planes: it keeps a HostedControlPlane's host objects (pkg/hosted)
// in line with its spec, makes the cluster's certificates and kubeconfig Secret the
// way KubeadmControlPlane does (Cluster API's util/secret and util/kubeconfig), and
// reports the contract's status fields, so that Cluster API, CABPK and CAPK bring
// up the worker VMs unchanged.
package hostedcontrolplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/secret"
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
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// fieldOwner is the server-side apply field manager of the host objects.
const fieldOwner = "knest-hosted-control-plane"

// applier applies the host objects, which the HostedControlPlane controls. ReadBack:
// the reconcile reads what the server has (the Service's clusterIP, the
// StatefulSet's, Deployment's and Job's status) from the objects it applied.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, FieldOwner: fieldOwner, ReadBack: true}
}

// Reconciler reconciles HostedControlPlanes.
type Reconciler struct {
	Client client.Client
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
		// The status speaks for this generation only once a reconcile of it went
		// through: a failed one leaves Cluster API reading the older generation's.
		if reterr == nil {
			hcp.Status.ObservedGeneration = hcp.Generation
		}
		if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{hcpv1.AvailableCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("failed to patch HostedControlPlane: %w", err)})
		}
	}()
	requeueAfter, err := r.reconcileNormal(ctx, hcp, c)
	if err != nil {
		conditions.Set(hcp, metav1.Condition{Type: hcpv1.AvailableCondition, Status: metav1.ConditionFalse,
			Reason: "ReconcileFailed", Message: err.Error()})
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter}, nil
}

// reconcileNormal returns how soon to look again when no watched object will say
// (0: when one does).
func (r *Reconciler) reconcileNormal(ctx context.Context, hcp *hcpv1.HostedControlPlane, c *clusterv1.Cluster) (requeueAfter time.Duration, err error) {
	owner := *metav1.NewControllerRef(hcp, hcpv1.GroupVersion.WithKind("HostedControlPlane"))
	clusterKey := util.ObjectKey(c)

	// The cluster's CAs and service-account key, as KubeadmControlPlane makes them.
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.LookupOrGenerate(ctx, r.Client, clusterKey, owner); err != nil {
		return 0, fmt.Errorf("failed to look up or generate the cluster certificates: %w", err)
	}

	svc := hosted.Service(hcp, c.Name)
	if _, err := r.applier().Apply(ctx, hcp, svc); err != nil {
		return 0, err
	}
	if svc.Spec.ClusterIP == "" {
		return 10 * time.Second, nil
	}
	in := hosted.Input{HCP: hcp, Cluster: c.Name, ServiceIP: svc.Spec.ClusterIP}
	hcp.Spec.ControlPlaneEndpoint = in.Endpoint()
	if err := r.reconcileKubeconfig(ctx, clusterKey, in.Endpoint(), owner); err != nil {
		return 0, err
	}

	cm, err := in.KubeadmConfig()
	if err != nil {
		return 0, err
	}
	if _, err := r.applier().Apply(ctx, hcp, cm); err != nil {
		return 0, err
	}
	configHash, err := cluster.ContentHash([]string{hcp.Spec.Version, cm.Data["kubeadm.yaml"]})
	if err != nil {
		return 0, err
	}

	var persistent bool
	if in.EtcdStorageClass, persistent, err = r.etcdStorageClass(ctx, hcp, c.Name); err != nil {
		return 0, err
	}
	if !persistent {
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.NoStorageClassReason,
			"etcd needs a volume that outlives its pod and the host has no default StorageClass: make one the default, "+
				"or create the cluster with controlPlane.etcd.storageClassName, or controlPlane.etcd.ephemeral to lose the tenant's objects with the pod")
		// StorageClasses are not watched: look again for a default one.
		return 30 * time.Second, nil
	}
	hcp.Status.EtcdPersistent = ptr.To(in.EtcdStorageClass != nil)
	_, in.EtcdStopped = hcp.Annotations[hcpv1.EtcdStoppedAnnotation]
	if err := r.reconcileEtcdCerts(ctx, hcp, c.Name, owner); err != nil {
		return 0, err
	}
	sts, etcdSvc, err := in.Etcd()
	if err != nil {
		return 0, err
	}
	for _, p := range in.Policies() {
		if _, err := r.applier().Apply(ctx, hcp, p); err != nil {
			return 0, err
		}
	}
	for _, b := range in.DisruptionBudgets() {
		if _, err := r.applier().Apply(ctx, hcp, b); err != nil {
			return 0, err
		}
	}
	agent, agentSet, err := in.Konnectivity()
	if err != nil {
		return 0, err
	}
	for _, obj := range []client.Object{agent, agentSet} {
		if _, err := r.applier().Apply(ctx, hcp, obj); err != nil {
			return 0, err
		}
	}
	// The StatefulSet's volumeClaimTemplates cannot change: etcdStorageClass keeps
	// an existing one's, so its apply never tries.
	for _, obj := range []client.Object{etcdSvc, sts} {
		if _, err := r.applier().Apply(ctx, hcp, obj); err != nil {
			return 0, err
		}
	}
	if err := r.adoptEtcdClaims(ctx, hcp, c.Name); err != nil {
		return 0, err
	}
	deploy := in.Deployment(configHash[:16])
	if _, err := r.applier().Apply(ctx, hcp, deploy); err != nil {
		return 0, err
	}
	r.setReplicas(hcp, deploy)

	switch {
	case in.EtcdStopped:
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.EtcdStoppedReason, "etcd is stopped while a restore from a snapshot writes its volume")
		return 0, nil
	case sts.Status.ReadyReplicas < 1 && !initialized(hcp):
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForEtcdReason, "Waiting for etcd")
		return 0, nil
	case hcp.Status.Version != hcp.Spec.Version || !rolledOut(deploy):
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForAPIServerReason,
			fmt.Sprintf("Waiting for an API server at %s (%d of %d available, %d up to date)", hcp.Spec.Version,
				ptr.Deref(hcp.Status.AvailableReplicas, 0), ptr.Deref(hcp.Spec.Replicas, 1), ptr.Deref(hcp.Status.UpToDateReplicas, 0)))
		return 0, nil
	}

	// The tenant side, with the version's kubeadm; again after every change of
	// version or configuration (kube-proxy, CoreDNS, kubelet-config move with it).
	// A Job's pod template is immutable: its name carries the template's hash, so a
	// changed one is a new Job, never an apply to the old.
	job := in.Job(configHash)
	if _, err := r.applier().Apply(ctx, hcp, job); err != nil {
		return 0, err
	}
	if failed := jobFailed(job); failed != nil {
		return r.retryJob(ctx, hcp, job, failed)
	}
	if !jobSucceeded(job) {
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForTenantReason,
			fmt.Sprintf("Waiting for kubeadm's phases in the tenant (Job %s)", job.Name))
		return 0, nil
	}
	hcp.Status.FailedBootstrapJobs = 0
	if err := r.pruneJobs(ctx, hcp, c.Name, job.Name); err != nil {
		return 0, err
	}
	hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	setAvailable(hcp, metav1.ConditionTrue, hcpv1.AvailableReason, "")
	return 0, nil
}

// rolledOut: every API server pod runs the current template and one is available,
// so kubeadm's phases meet the configuration they upload.
func rolledOut(d *appsv1.Deployment) bool {
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == st.Replicas && st.AvailableReplicas >= 1
}

func initialized(hcp *hcpv1.HostedControlPlane) bool {
	return ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false)
}

func setAvailable(hcp *hcpv1.HostedControlPlane, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(hcp, metav1.Condition{Type: hcpv1.AvailableCondition, Status: status, Reason: reason, Message: msg})
}

// setReplicas reports the API server pods as the contract counts machines. The
// version is the spec's once every replica runs it and is available, else the one
// reported before (the oldest still running).
func (r *Reconciler) setReplicas(hcp *hcpv1.HostedControlPlane, d *appsv1.Deployment) {
	st := d.Status
	hcp.Status.ExternalManagedControlPlane = ptr.To(true)
	hcp.Status.Selector = labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	hcp.Status.Replicas = ptr.To(st.Replicas)
	hcp.Status.ReadyReplicas = ptr.To(st.ReadyReplicas)
	hcp.Status.AvailableReplicas = ptr.To(st.AvailableReplicas)
	upToDate := int32(0)
	if st.ObservedGeneration >= d.Generation {
		upToDate = st.UpdatedReplicas
	}
	hcp.Status.UpToDateReplicas = ptr.To(upToDate)
	want := ptr.Deref(d.Spec.Replicas, 1)
	if st.ObservedGeneration >= d.Generation && upToDate == want && st.Replicas == want && st.AvailableReplicas >= 1 {
		hcp.Status.Version = hcp.Spec.Version
	}
}

// reconcileKubeconfig writes Cluster API's kubeconfig Secret for the endpoint, and
// renews its client certificate as KubeadmControlPlane does.
func (r *Reconciler) reconcileKubeconfig(ctx context.Context, clusterKey client.ObjectKey, ep clusterv1.APIEndpoint, owner metav1.OwnerReference) error {
	// Cluster API's helper takes host:port and adds the scheme.
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
	s := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: clusterKey.Namespace, Name: secret.Name(clusterKey.Name, secret.Kubeconfig)}, s)
	switch {
	case apierrors.IsNotFound(err):
		return kubeconfig.CreateSecretWithOwner(ctx, r.Client, clusterKey, hostPort, owner)
	case err != nil:
		return err
	}
	if rotate, err := kubeconfig.NeedsClientCertRotation(s, 30*24*time.Hour); err != nil || !rotate {
		return err
	}
	return kubeconfig.RegenerateSecret(ctx, r.Client, s)
}

// etcdStorageClass picks etcd's volume: the spec's class, else the host's default
// class (""), else none (persistent false). An emptyDir (nil class) only when the
// spec asks for one. A StatefulSet's volumes cannot change, so an existing one
// keeps what it has.
func (r *Reconciler) etcdStorageClass(ctx context.Context, hcp *hcpv1.HostedControlPlane, clusterName string) (class *string, ok bool, err error) {
	sts := &appsv1.StatefulSet{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: hosted.EtcdName(clusterName)}, sts)
	switch {
	case err == nil:
		if len(sts.Spec.VolumeClaimTemplates) == 0 {
			return nil, true, nil
		}
		return ptr.To(ptr.Deref(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName, "")), true, nil
	case !apierrors.IsNotFound(err):
		return nil, false, err
	}
	switch {
	case hcp.Spec.Etcd.Ephemeral:
		return nil, true, nil
	case hcp.Spec.Etcd.StorageClassName != "":
		return ptr.To(hcp.Spec.Etcd.StorageClassName), true, nil
	}
	classes := &storagev1.StorageClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return nil, false, err
	}
	for _, sc := range classes.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return ptr.To(sc.Name), true, nil
		}
	}
	return nil, false, nil
}

// reconcileEtcdCerts keeps etcd's serving and peer certificates, signed by Cluster
// API's etcd CA, in their Secret; they are made anew when missing, for other
// names or CA, or near their end.
func (r *Reconciler) reconcileEtcdCerts(ctx context.Context, hcp *hcpv1.HostedControlPlane, clusterName string, owner metav1.OwnerReference) error {
	ca := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: secret.Name(clusterName, secret.EtcdCA)}, ca); err != nil {
		return fmt.Errorf("failed to read the etcd CA: %w", err)
	}
	current := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: hosted.EtcdCertsName(clusterName)}, current)
	switch {
	case err == nil && hosted.EtcdCertificatesCurrent(current.Data, clusterName, hcp.Namespace, ca.Data[secret.TLSCrtDataName], time.Now()):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	data, err := hosted.EtcdCertificates(clusterName, hcp.Namespace, ca.Data[secret.TLSCrtDataName], ca.Data[secret.TLSKeyDataName])
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: hosted.EtcdCertsName(clusterName), Namespace: hcp.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	// Applied only here, when made anew: the keys are random, so rendering them on
	// every reconcile would never match the applied hash.
	_, err = r.applier().Apply(ctx, hcp, s)
	return err
}

// adoptEtcdClaims makes the HostedControlPlane an owner of etcd's volumes, which
// the StatefulSet keeps (retention policy Retain): they survive the StatefulSet and
// go with the cluster.
func (r *Reconciler) adoptEtcdClaims(ctx context.Context, hcp *hcpv1.HostedControlPlane, clusterName string) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(hcp.Namespace), client.MatchingLabels(hosted.EtcdClaimSelector(clusterName))); err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if !hosted.IsEtcdClaim(clusterName, pvc.Name) || util.IsOwnedByObject(pvc, hcp, hcpv1.GroupVersion.WithKind("HostedControlPlane").GroupKind()) {
			continue
		}
		base := pvc.DeepCopy()
		pvc.OwnerReferences = util.EnsureOwnerRef(pvc.OwnerReferences, metav1.OwnerReference{
			APIVersion: hcpv1.GroupVersion.String(), Kind: "HostedControlPlane", Name: hcp.Name, UID: hcp.UID,
		})
		if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to make %s an owner of etcd volume %s: %w", hcp.Name, pvc.Name, err)
		}
	}
	return nil
}

// jobBackoff is the wait before a failed kubeadm Job is made anew: 10 s doubled
// for each failure in a row, at most 5 minutes.
func jobBackoff(failures int32) time.Duration {
	d := 10 * time.Second
	for i := int32(1); i < failures && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// retryJob reports a failed kubeadm Job and deletes it once its backoff has passed,
// so the next reconcile makes it anew (the cluster's state is kept; kubeadm's
// phases create or update).
func (r *Reconciler) retryJob(ctx context.Context, hcp *hcpv1.HostedControlPlane, job *batchv1.Job, failed *batchv1.JobCondition) (time.Duration, error) {
	// A failure is counted when first seen: in between, the Job made anew ran and
	// the condition said so.
	failures := hcp.Status.FailedBootstrapJobs
	if conditions.GetReason(hcp, hcpv1.AvailableCondition) != hcpv1.TenantBootstrapFailedReason {
		failures++
	}
	hcp.Status.FailedBootstrapJobs = failures
	wait := jobBackoff(failures) - time.Since(failed.LastTransitionTime.Time)
	setAvailable(hcp, metav1.ConditionFalse, hcpv1.TenantBootstrapFailedReason,
		fmt.Sprintf("kubeadm's phases in the tenant failed (Job %s: %s %s; %d in a row); retrying in %s: its pod's log says why",
			job.Name, failed.Reason, failed.Message, failures, max(wait, 0).Round(time.Second)))
	if wait > 0 {
		return wait, nil
	}
	// Its deletion brings the HostedControlPlane back (it owns the Job).
	if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("failed to delete failed Job %s: %w", job.Name, err)
	}
	return 0, nil
}

func jobFailed(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// pruneJobs deletes the cluster's kubeadm Jobs of earlier versions or
// configurations once the current one has succeeded.
func (r *Reconciler) pruneJobs(ctx context.Context, hcp *hcpv1.HostedControlPlane, clusterName, keep string) error {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(hcp.Namespace), client.MatchingLabels(hosted.JobSelector(clusterName))); err != nil {
		return err
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.Name == keep || !metav1.IsControlledBy(j, hcp) {
			continue
		}
		if err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
