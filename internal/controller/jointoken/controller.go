// Package jointoken keeps the bootstrap token of each knest worker that has joined
// its tenant valid, so that its VM, started again from its container disk (moved off a
// drained host node, its host node restarted or lost, its qemu killed), runs its
// `kubeadm join` again and comes back as the same node.
//
// CABPK renews a Machine's token only until its node joins; 15 minutes later the
// tenant's token cleaner deletes it, and a worker VM that starts again after that
// cannot join: it stays NotReady until its health check replaces the Machine
// (CAPK issue #70). CABPK keeps a MachinePool's token alive for the same reason, new
// instances joining at any time; this does that for each Machine of a knest pool,
// while the Machine exists. The trade is the same: a token that can join a node
// lives as long as its Machine, on the VM's cloud-init disk and in the host's
// user-data Secret. Control-plane machines are left alone: a single one comes back
// from its etcd disk with `kubeadm init`, which needs no token, and a joined member
// joining again would meet its own etcd member, so its health check replaces it.
package jointoken

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/tenant"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// TTL is how long a kept token stays valid past each renewal: CABPK's default
// (--bootstrap-token-ttl), renewed on CABPK's schedule (see Reconcile).
const TTL = 15 * time.Minute

// Description is written into the tokens this package recreates.
const Description = "bootstrap token of a knest worker, kept valid by knest while its Machine exists so that its VM can join again"

// Reconciler keeps worker Machines' join tokens valid in their tenants.
type Reconciler struct {
	// Client reads Machines (cached, knest's only).
	Client client.Client
	// APIReader reads KubeadmConfigs and kubeconfig Secrets, uncached.
	APIReader client.Reader
	// Timeout bounds each request to a tenant's API.
	Timeout time.Duration
}

// SetupWithManager watches knest's Machines; a Machine comes back when its node
// joins, then every TTL/3.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	joined := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, oldOK := e.ObjectOld.(*clusterv1.Machine)
			m, ok := e.ObjectNew.(*clusterv1.Machine)
			return oldOK && ok && old.Status.NodeRef != m.Status.NodeRef
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("jointoken").
		For(&clusterv1.Machine{}, builder.WithPredicates(predicate.NewPredicateFuncs(knestWorker), joined)).
		WithOptions(options).
		Complete(r)
}

// knestWorker: a Machine of a knest worker pool.
func knestWorker(o client.Object) bool {
	m, ok := o.(*clusterv1.Machine)
	return ok && m.Labels[knestv1.ClusterNameLabel] != "" && m.Labels[knestv1.PoolNameLabel] != "" && !util.IsControlPlaneMachine(m)
}

// Reconcile renews the token of a joined worker when it would expire within 5/6 of
// TTL and looks again after TTL/3, as CABPK does for a Machine not yet joined: two
// chances to renew before it expires. A token the token cleaner already deleted is
// made again, with the ID and secret in the Machine's user data.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Before the join the token is CABPK's to renew.
	if !knestWorker(m) || !m.DeletionTimestamp.IsZero() || !m.Status.NodeRef.IsDefined() {
		return ctrl.Result{}, nil
	}
	ref := m.Spec.Bootstrap.ConfigRef
	if ref.Kind != "KubeadmConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group {
		return ctrl.Result{}, nil
	}
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	token := cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token
	if token == "" {
		return ctrl.Result{}, nil
	}
	cs, err := tenant.Clientset(ctx, r.APIReader, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, r.Timeout)
	if err != nil {
		return ctrl.Result{}, err
	}
	renewed, err := Keep(ctx, cs.CoreV1().Secrets(metav1.NamespaceSystem), token, time.Now())
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to keep the bootstrap token of machine %s: %w", m.Name, err)
	}
	if renewed {
		ctrl.LoggerFrom(ctx).V(1).Info("Renewed the bootstrap token of a joined worker", "node", m.Status.NodeRef.Name)
	}
	return ctrl.Result{RequeueAfter: TTL / 3}, nil
}

// Keep makes token (id.secret) valid until now+TTL in secrets (a tenant's
// kube-system), unless it already is until past now+5/6 of TTL, creating its Secret
// if it is gone. It reports whether it wrote.
func Keep(ctx context.Context, secrets typedcorev1.SecretInterface, token string, now time.Time) (bool, error) {
	parts := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(token)
	if len(parts) != 3 {
		return false, fmt.Errorf("the bootstrap token is not of the form %s", bootstrapapi.BootstrapTokenPattern)
	}
	id, secret := parts[1], parts[2]
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(id),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
		bootstrapapi.BootstrapTokenExpirationKey:       []byte(now.UTC().Add(TTL).Format(time.RFC3339)),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		// kubeadm's group for node joins, as CABPK's tokens have.
		bootstrapapi.BootstrapTokenExtraGroupsKey: []byte("system:bootstrappers:kubeadm:default-node-token"),
		bootstrapapi.BootstrapTokenDescriptionKey: []byte(Description),
	}
	name := bootstraputil.BootstrapTokenSecretName(id)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
			Type:       bootstrapapi.SecretTypeBootstrapToken,
			Data:       data,
		}, metav1.CreateOptions{})
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	expires, err := time.Parse(time.RFC3339, string(s.Data[bootstrapapi.BootstrapTokenExpirationKey]))
	if err == nil && expires.After(now.Add(TTL*5/6)) && string(s.Data[bootstrapapi.BootstrapTokenSecretKey]) == secret {
		return false, nil
	}
	// CABPK's description, where the Secret is still CABPK's, stays.
	if d, ok := s.Data[bootstrapapi.BootstrapTokenDescriptionKey]; ok {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = d
	}
	s.Data = data
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err == nil, err
}
