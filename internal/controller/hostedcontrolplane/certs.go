package hostedcontrolplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeconfigRenewBefore is how long before its end the kubeconfig's client
// certificate is made anew, as KubeadmControlPlane does.
const kubeconfigRenewBefore = 30 * 24 * time.Hour

// reconcileCertificates looks up the cluster's CAs and service-account key, and
// makes those missing, as KubeadmControlPlane does: a CA someone brought is kept.
func (r *Reconciler) reconcileCertificates(ctx context.Context, s *scope) (stepResult, error) {
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.LookupOrGenerate(ctx, r.Client, util.ObjectKey(s.cluster), s.owner); err != nil {
		return stepResult{}, fmt.Errorf("failed to look up or generate the cluster certificates: %w", err)
	}
	return stepResult{}, nil
}

// reconcileKubeconfig writes Cluster API's kubeconfig Secret for the endpoint, and
// renews its client certificate as KubeadmControlPlane does.
func (r *Reconciler) reconcileKubeconfig(ctx context.Context, s *scope) (stepResult, error) {
	clusterKey := util.ObjectKey(s.cluster)
	ep := s.in.Endpoint()
	// Cluster API's helper takes host:port and adds the scheme.
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
	current := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: clusterKey.Namespace, Name: secret.Name(clusterKey.Name, secret.Kubeconfig)}, current)
	switch {
	case apierrors.IsNotFound(err):
		return stepResult{}, kubeconfig.CreateSecretWithOwner(ctx, r.Client, clusterKey, hostPort, s.owner)
	case err != nil:
		return stepResult{}, err
	}
	if rotate, err := kubeconfig.NeedsClientCertRotation(current, kubeconfigRenewBefore); err != nil || !rotate {
		return stepResult{}, err
	}
	return stepResult{}, kubeconfig.RegenerateSecret(ctx, r.Client, current)
}
