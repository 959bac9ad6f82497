package hostedcontrolplane

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// reconcileEtcdStorage picks etcd's volume, and waits while the host has none that
// outlives the pod.
func (r *Reconciler) reconcileEtcdStorage(ctx context.Context, s *scope) (stepResult, error) {
	class, persistent, err := r.etcdStorageClass(ctx, s.hcp, s.cluster.Name)
	if err != nil {
		return stepResult{}, err
	}
	if !persistent {
		setNoStorageClass(s.hcp)
		return stepResult{wait: true, requeueAfter: storageClassRequeue}, nil
	}
	s.in.EtcdStorageClass = class
	s.hcp.Status.EtcdPersistent = ptr.To(class != nil)
	return stepResult{}, nil
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

// reconcileEtcdCertificates keeps etcd's serving and peer certificates, signed by
// Cluster API's etcd CA, in their Secret; they are made anew when missing, for
// other names or CA, or near their end.
func (r *Reconciler) reconcileEtcdCertificates(ctx context.Context, s *scope) (stepResult, error) {
	hcp, clusterName := s.hcp, s.cluster.Name
	ca := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: secret.Name(clusterName, secret.EtcdCA)}, ca); err != nil {
		return stepResult{}, fmt.Errorf("failed to read the etcd CA: %w", err)
	}
	current := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: hosted.EtcdCertsName(clusterName)}, current)
	switch {
	case err == nil && hosted.EtcdCertificatesCurrent(current.Data, clusterName, hcp.Namespace, ca.Data[secret.TLSCrtDataName], time.Now()):
		return stepResult{}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return stepResult{}, err
	}
	data, err := hosted.EtcdCertificates(clusterName, hcp.Namespace, ca.Data[secret.TLSCrtDataName], ca.Data[secret.TLSKeyDataName])
	if err != nil {
		return stepResult{}, err
	}
	certs := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: hosted.EtcdCertsName(clusterName), Namespace: hcp.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	// Applied only here, when made anew: the keys are random, so rendering them on
	// every reconcile would never match the applied hash.
	_, err = r.applier().Apply(ctx, hcp, certs)
	return stepResult{}, err
}

// renderEtcd renders etcd's StatefulSet and Service, which reconcileEtcd applies
// after the policies. Rendered here, a version knest has no etcd image for fails
// the reconcile before the policies are applied.
func renderEtcd(_ context.Context, s *scope) (stepResult, error) {
	_, s.in.EtcdStopped = s.hcp.Annotations[hcpv1.EtcdStoppedAnnotation]
	var err error
	s.etcd, s.etcdSvc, err = s.in.Etcd()
	return stepResult{}, err
}

// reconcileEtcd applies etcd's Service and StatefulSet. The StatefulSet's
// volumeClaimTemplates cannot change: etcdStorageClass keeps an existing one's, so
// its apply never tries.
func (r *Reconciler) reconcileEtcd(ctx context.Context, s *scope) (stepResult, error) {
	for _, obj := range []client.Object{s.etcdSvc, s.etcd} {
		if _, err := r.applier().Apply(ctx, s.hcp, obj); err != nil {
			return stepResult{}, err
		}
	}
	return stepResult{}, nil
}

// adoptEtcdClaims makes the HostedControlPlane an owner of etcd's volumes, which
// the StatefulSet keeps (retention policy Retain): they survive the StatefulSet and
// go with the cluster.
func (r *Reconciler) adoptEtcdClaims(ctx context.Context, s *scope) (stepResult, error) {
	hcp, clusterName := s.hcp, s.cluster.Name
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(hcp.Namespace), client.MatchingLabels(hosted.EtcdClaimSelector(clusterName))); err != nil {
		return stepResult{}, err
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
			return stepResult{}, fmt.Errorf("failed to make %s an owner of etcd volume %s: %w", hcp.Name, pvc.Name, err)
		}
	}
	return stepResult{}, nil
}
