package hostedcontrolplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// etcd's volume: an existing StatefulSet keeps its own (its claim templates cannot
// change), else the spec's class, else the host's default one; an emptyDir only
// when the spec asks, and a wait when there is nothing to pick.
func TestReconcileEtcdStorage(t *testing.T) {
	ctx := context.Background()
	// withStatefulSet creates etcd's StatefulSet as rendered for class.
	withStatefulSet := func(class *string) func(Gomega, *scope) {
		return func(g Gomega, s *scope) {
			in := s.in
			in.EtcdStorageClass = class
			sts, _, err := in.Etcd()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.Client.Create(ctx, sts)).To(Succeed())
		}
	}
	noClass := func(_ Gomega, s *scope) { s.hcp.Spec.Etcd.StorageClassName = "" }
	for _, tc := range []struct {
		name   string
		before func(Gomega, *scope)
		// class is the one picked; wait when none is.
		class *string
		wait  bool
	}{
		{name: "the spec's class", class: ptr.To("standard")},
		{name: "ephemeral", before: func(_ Gomega, s *scope) { s.hcp.Spec.Etcd = hcpv1.EtcdSpec{Ephemeral: true} }},
		// Runs before the host has a default class (the next case makes one).
		{name: "no class at all", before: noClass, wait: true},
		{name: "the host's default class", before: func(g Gomega, s *scope) {
			noClass(g, s)
			sc := &storagev1.StorageClass{
				ObjectMeta:  metav1.ObjectMeta{Name: "knest-test-default", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
				Provisioner: "knest.test/none",
			}
			g.Expect(env.Client.Create(ctx, sc)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(ctx, sc) })
		}, class: ptr.To("knest-test-default")},
		{name: "an existing StatefulSet's class", before: withStatefulSet(ptr.To("fast")), class: ptr.To("fast")},
		{name: "an existing StatefulSet's default class", before: withStatefulSet(ptr.To("")), class: ptr.To("")},
		{name: "an existing StatefulSet on an emptyDir", before: withStatefulSet(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newTestScope(t, g, "storage", "10.95.0.30")
			if tc.before != nil {
				tc.before(g, s)
			}
			res, err := reconciler().reconcileEtcdStorage(ctx, s)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.wait {
				g.Expect(res).To(Equal(stepResult{wait: true, requeueAfter: storageClassRequeue}))
				g.Expect(conditions.GetReason(s.hcp, hcpv1.AvailableCondition)).To(Equal(hcpv1.NoStorageClassReason))
				g.Expect(s.hcp.Status.EtcdPersistent).To(BeNil())
				return
			}
			g.Expect(res).To(Equal(stepResult{}))
			g.Expect(s.in.EtcdStorageClass).To(Equal(tc.class))
			g.Expect(s.hcp.Status.EtcdPersistent).To(HaveValue(Equal(tc.class != nil)))
		})
	}
}

// etcd's member certificates are made from the etcd CA, kept while current, and
// made anew for another CA; without the CA the step fails and says so.
func TestReconcileEtcdCertificates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "etcdcerts", "10.95.0.31")

	_, err := reconciler().reconcileEtcdCertificates(ctx, s)
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the etcd CA")))

	_, err = reconciler().reconcileCertificates(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	memberCerts := func() *corev1.Secret {
		out := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.hcp.Namespace, Name: hosted.EtcdCertsName(s.cluster.Name)}, out)).To(Succeed())
		return out
	}
	current := func(certs *corev1.Secret) bool {
		ca := clusterSecret(g, s, secret.EtcdCA)
		return hosted.EtcdCertificatesCurrent(certs.Data, s.cluster.Name, s.hcp.Namespace, ca.Data[secret.TLSCrtDataName], time.Now())
	}

	_, err = reconciler().reconcileEtcdCertificates(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	made := memberCerts()
	g.Expect(current(made)).To(BeTrue())
	g.Expect(metav1.GetControllerOf(made)).To(HaveField("UID", s.hcp.UID))
	g.Expect(made.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, s.cluster.Name))

	_, err = reconciler().reconcileEtcdCertificates(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberCerts().ResourceVersion).To(Equal(made.ResourceVersion), "current certificates made anew")

	// Another etcd CA: the members' certificates no longer chain to it.
	newCA := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{}).GetByPurpose(secret.EtcdCA)
	g.Expect(newCA.Generate()).To(Succeed())
	ca := clusterSecret(g, s, secret.EtcdCA)
	ca.Data = newCA.AsSecret(util.ObjectKey(s.cluster), s.owner).Data
	g.Expect(env.Client.Update(ctx, ca)).To(Succeed())
	g.Expect(current(made)).To(BeFalse())
	_, err = reconciler().reconcileEtcdCertificates(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(current(memberCerts())).To(BeTrue())
}

// renderEtcd stops etcd while the restore's annotation is set, and fails for a
// version knest has no etcd image for.
func TestRenderEtcd(t *testing.T) {
	g := NewWithT(t)
	hcp := &hcpv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-control-plane"}}
	hcp.Spec.Version = "v1.35.4"
	s := &scope{hcp: hcp, in: hosted.Input{HCP: hcp, Cluster: "demo", ServiceIP: "10.95.0.1", EtcdStorageClass: ptr.To("standard")}}

	_, err := renderEtcd(context.Background(), s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.in.EtcdStopped).To(BeFalse())
	g.Expect(s.etcd.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(s.etcdSvc.Name).To(Equal(hosted.EtcdName("demo")))

	hcp.Annotations = map[string]string{hcpv1.EtcdStoppedAnnotation: ""}
	_, err = renderEtcd(context.Background(), s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.in.EtcdStopped).To(BeTrue())
	g.Expect(s.etcd.Spec.Replicas).To(HaveValue(BeZero()))

	hcp.Spec.Version = "v1.20.0"
	_, err = renderEtcd(context.Background(), s)
	g.Expect(err).To(HaveOccurred())
}

// etcd's claims get the control plane as an owner (not their controller: the
// StatefulSet made them), once, beside any owner they had; the cluster's other
// claims are left alone.
func TestAdoptEtcdClaims(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newTestScope(t, g, "adopt", "10.95.0.32")
	claim := func(name string, owners ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.hcp.Namespace, Name: name,
				Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name}, OwnerReferences: owners},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		g.Expect(env.Client.Create(ctx, pvc)).To(Succeed())
		return pvc
	}
	byCluster := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: s.cluster.Name, UID: s.cluster.UID}
	byHCP := metav1.OwnerReference{APIVersion: hcpv1.GroupVersion.String(), Kind: "HostedControlPlane", Name: s.hcp.Name, UID: s.hcp.UID}
	first := claim(hosted.EtcdClaimName(s.cluster.Name, 0))
	second := claim(hosted.EtcdClaimName(s.cluster.Name, 1), byCluster)
	adopted := claim(hosted.EtcdClaimName(s.cluster.Name, 2), byHCP)
	other := claim("data-" + s.cluster.Name + "-worker-0")

	for range 2 {
		_, err := reconciler().adoptEtcdClaims(ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
	}
	owners := func(pvc *corev1.PersistentVolumeClaim) []metav1.OwnerReference {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
		return pvc.OwnerReferences
	}
	g.Expect(owners(first)).To(Equal([]metav1.OwnerReference{byHCP}))
	g.Expect(owners(second)).To(Equal([]metav1.OwnerReference{byCluster, byHCP}))
	g.Expect(owners(adopted)).To(Equal([]metav1.OwnerReference{byHCP}))
	g.Expect(owners(other)).To(BeEmpty())
}
