// Package etcdbackup is the backup controller: for every NestedCluster it keeps
// the objects that snapshot the tenant's etcd on a schedule (pkg/backup), reports
// the snapshots in status.backup, and restores one when the knest.dev/restore-from
// annotation asks (restore.go).
package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/apply"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/pkg/backup"
)

// +kubebuilder:rbac:groups=knest.dev,resources=nestedclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=knest.dev,resources=nestedclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch

// FieldOwner is the field manager of what this controller applies.
const FieldOwner = "knest-backup"

// Reconciler keeps each NestedCluster's backups.
type Reconciler struct {
	Client client.Client
	// APIReader lists the pods of backup and restore Jobs and of VMs, which the
	// manager does not cache.
	APIReader client.Reader
	// Image is the knest image, which backup and restore Jobs run.
	Image string
	// Tenants reads the tenant's identity: a restore is done when its API answers
	// as the same cluster.
	Tenants tenant.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager watches NestedClusters and the Jobs and CronJobs of their
// backups and restores.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("etcdbackup").
		// Its own status writes, and the NestedCluster controller's, are not news.
		For(&knestv1.NestedCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&batchv1.CronJob{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(jobToCluster)).
		WithOptions(options)
	return tenant.WatchNamespaces(b, r.Client).Complete(r)
}

// jobToCluster maps a backup or restore Job to its NestedCluster (whose name
// the Cluster API cluster shares).
func jobToCluster(_ context.Context, o client.Object) []ctrl.Request {
	l := o.GetLabels()
	if c := l[clusterv1.ClusterNameLabel]; c != "" && (l[backup.ComponentLabel] == backup.ComponentBackup || l[backup.ComponentLabel] == backup.ComponentRestore) {
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: c}}}
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile keeps one cluster's backup objects and status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	nc := &knestv1.NestedCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// What this controller made is owned by the NestedCluster and goes with it.
	if !nc.DeletionTimestamp.IsZero() || nc.Spec.Paused {
		return ctrl.Result{}, nil
	}
	// Outside tenant namespaces knest may not act; the NestedCluster controller says so.
	if err := tenant.CheckNamespace(ctx, r.Client, nc.Namespace); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(ignoreNotEnabled(err))
	}
	helper, err := patch.NewHelper(nc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("failed to patch NestedCluster %s: %w", nc.Name, err)})
		}
	}()

	in := backup.Input{NC: nc, Image: r.Image}
	ready, err := r.reconcileClientCert(ctx, nc)
	if err != nil || !ready {
		// The etcd CA comes with the control plane; its Secret is watched only
		// through the cache, not by this controller.
		return ctrl.Result{RequeueAfter: 15 * time.Second}, err
	}
	cj := in.CronJob()
	if restoring(nc) {
		// No snapshot of an etcd that is being replaced.
		cj.Spec.Suspend = ptr.To(true)
	}
	objs := []client.Object{in.Claim(), cj}
	if !nc.Spec.ControlPlane.IsHosted() {
		objs = append(objs, in.Service())
	}
	for _, o := range objs {
		if err := r.apply(ctx, nc, o); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.reportSnapshots(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if restoring(nc) {
		return r.reconcileRestore(ctx, nc, in)
	}
	return ctrl.Result{}, nil
}

// reconcileClientCert keeps the backup client's certificate, signed by the
// cluster's etcd CA; false while that CA does not exist yet.
func (r *Reconciler) reconcileClientCert(ctx context.Context, nc *knestv1.NestedCluster) (bool, error) {
	ca := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: secret.Name(nc.Name, secret.EtcdCA)}, ca); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	current := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: backup.ClientCertName(nc.Name)}, current)
	switch {
	case err == nil && backup.ClientCertificateCurrent(current.Data, ca.Data[secret.TLSCrtDataName], r.now()):
		return true, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	data, err := backup.ClientCertificate(ca.Data[secret.TLSCrtDataName], ca.Data[secret.TLSKeyDataName])
	if err != nil {
		return false, err
	}
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: backup.ClientCertName(nc.Name), Namespace: nc.Namespace,
			Labels: backup.Selector(nc.Name, backup.ComponentBackup)},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	return true, r.apply(ctx, nc, s)
}

// apply server-side applies obj, owned by nc, unless it carries the hash of the
// same content already.
func (r *Reconciler) apply(ctx context.Context, nc *knestv1.NestedCluster, obj client.Object) error {
	// A claim's spec cannot change once bound: made once.
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		if err := controllerutil.SetControllerReference(nc, obj, r.Client.Scheme()); err != nil {
			return err
		}
		return client.IgnoreAlreadyExists(r.Client.Create(ctx, obj))
	}
	_, err := (&apply.Applier{Client: r.Client, FieldOwner: FieldOwner}).Apply(ctx, nc, obj)
	return err
}

// reportSnapshots reads what the backup Jobs' pods left in their termination
// messages into status.backup: the newest snapshot, the snapshots on the volume,
// and a failure newer than the last snapshot.
func (r *Reconciler) reportSnapshots(ctx context.Context, nc *knestv1.NestedCluster) error {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(nc.Namespace), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentBackup))); err != nil {
		return err
	}
	st := &nc.Status.Backup
	var newest *backup.Result
	var failure string
	var failedAt time.Time
	for i := range pods.Items {
		term := terminated(&pods.Items[i], "snapshot")
		if term == nil {
			continue
		}
		if term.ExitCode != 0 {
			if t := term.FinishedAt.Time; t.After(failedAt) {
				failedAt, failure = t, failureMessage(term)
			}
			continue
		}
		res, err := backup.ParseResult(term.Message)
		if err != nil {
			continue
		}
		if newest == nil || res.TakenAt.After(newest.TakenAt) {
			newest = &res
		}
	}
	if newest != nil && (st.LastSnapshot == nil || newest.TakenAt.After(st.LastSnapshot.TakenAt.Time)) {
		st.LastSnapshot = &knestv1.Snapshot{Name: newest.Name, TakenAt: metav1.NewTime(newest.TakenAt), Revision: newest.Revision, SizeBytes: newest.SizeBytes}
		st.Snapshots = slices.Clone(newest.Snapshots)
	}
	switch {
	case failure != "" && (st.LastSnapshot == nil || failedAt.After(st.LastSnapshot.TakenAt.Time)):
		st.LastFailure = truncate(failure, 1024)
	case st.LastSnapshot != nil && !failedAt.After(st.LastSnapshot.TakenAt.Time):
		st.LastFailure = ""
	}
	return nil
}

// terminated is the named container's terminated state, once it has one.
func terminated(p *corev1.Pod, container string) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

func failureMessage(t *corev1.ContainerStateTerminated) string {
	if t.Message != "" {
		return t.Message
	}
	return fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func ignoreNotEnabled(err error) error {
	if errors.As(err, new(*tenant.NamespaceNotEnabledError)) {
		return nil
	}
	return err
}
