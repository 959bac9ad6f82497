package hosted

import (
	"crypto/x509"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/knest-dev/knest/pkg/backup"
)

func TestEtcdImageFollowsKubeadm(t *testing.T) {
	g := NewWithT(t)
	img, err := EtcdImage("v1.35.4")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).To(Equal("registry.k8s.io/etcd:3.6.6-0"))
	// Every minor the API accepts has one.
	for minor := 30; minor <= 36; minor++ {
		_, err := EtcdImage("v1." + strconv.Itoa(minor) + ".0")
		g.Expect(err).NotTo(HaveOccurred(), "minor %d", minor)
	}
	_, err = EtcdImage("v1.29.0")
	g.Expect(err).To(MatchError(ContainSubstring("no etcd image for Kubernetes v1.29.0")))
}

func etcdAt(t *testing.T, version string, class *string) *appsv1.StatefulSet {
	t.Helper()
	in := input()
	in.HCP.Spec.Version = version
	in.EtcdStorageClass = class
	sts, _, err := in.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	return sts
}

// A single member is re-created whenever its pod template changes: a patch
// upgrade must not change it, a minor upgrade only where kubeadm moves etcd.
func TestEtcdPodTemplateChangesOnlyWithEtcd(t *testing.T) {
	g := NewWithT(t)
	class := ptr.To("fast")
	base := etcdAt(t, "v1.35.4", class)
	g.Expect(equality.Semantic.DeepEqual(base.Spec.Template, etcdAt(t, "v1.35.9", class).Spec.Template)).To(BeTrue(),
		"a patch upgrade changed etcd's pod template")

	minor := etcdAt(t, "v1.34.4", class).Spec.Template
	g.Expect(minor.Spec.Containers[0].Image).To(Equal("registry.k8s.io/etcd:3.6.5-0"))
	minor.Spec.Containers[0].Image = base.Spec.Template.Spec.Containers[0].Image
	g.Expect(equality.Semantic.DeepEqual(base.Spec.Template, minor)).To(BeTrue(), "a minor upgrade changed more than etcd's image")

	// No kubeadm and no CA key in the pod: its certificates come from their Secret,
	// readable by the pod's group only.
	spec := base.Spec.Template.Spec
	g.Expect(spec.InitContainers).To(BeEmpty())
	var secrets int
	for _, v := range spec.Volumes {
		g.Expect(v.Projected).To(BeNil(), v.Name)
		if v.Secret != nil {
			secrets++
			g.Expect(v.Secret.SecretName).To(Equal(EtcdCertsName("demo")))
			g.Expect(v.Secret.Items).To(BeEmpty(), "each of its keys is one etcd reads")
			g.Expect(*v.Secret.DefaultMode&^0o440).To(BeZero(), "mode %o", *v.Secret.DefaultMode)
		}
	}
	g.Expect(secrets).To(Equal(1))
	// fsGroup's default change policy gives a member's data written as root (an
	// older knest's etcd) to the non-root user's group.
	g.Expect(spec.SecurityContext.FSGroupChangePolicy).To(BeNil())
}

func TestEtcdVolumeOutlivesTheStatefulSetAndBoundsTheQuota(t *testing.T) {
	g := NewWithT(t)
	sts := etcdAt(t, "v1.35.4", ptr.To(""))
	p := sts.Spec.PersistentVolumeClaimRetentionPolicy
	g.Expect(p.WhenDeleted).To(Equal(appsv1.RetainPersistentVolumeClaimRetentionPolicyType))
	g.Expect(p.WhenScaled).To(Equal(appsv1.RetainPersistentVolumeClaimRetentionPolicyType))
	g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
	// "" is the host's default class: no class name, so the API server picks it.
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(BeNil())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--quota-backend-bytes=1610612736")) // 3/4 of 2Gi

	in := input()
	in.EtcdStorageClass = ptr.To("fast")
	in.HCP.Spec.Etcd.Size = ptr.To(resource.MustParse("8Gi"))
	sts, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(Equal("fast"))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--quota-backend-bytes=6442450944"))

	// An emptyDir only when asked (nil class), and no quota beyond etcd's own.
	sts = etcdAt(t, "v1.35.4", nil)
	g.Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty())
	g.Expect(strings.Join(sts.Spec.Template.Spec.Containers[0].Command, " ")).NotTo(ContainSubstring("quota-backend-bytes"))
}

func TestEtcdCertificates(t *testing.T) {
	g := NewWithT(t)
	ca := secret.NewCertificatesForInitialControlPlane(nil).GetByPurpose(secret.EtcdCA)
	g.Expect(ca.Generate()).To(Succeed())
	data, err := EtcdCertificates("demo", "team-a", ca.KeyPair.Cert, ca.KeyPair.Key)
	g.Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	g.Expect(EtcdCertificatesCurrent(data, "demo", "team-a", ca.KeyPair.Cert, now)).To(BeTrue())
	// Its own keys and the CA's certificate; never the CA's key.
	g.Expect(data).To(HaveLen(5))
	g.Expect(data).To(HaveKey(EtcdCACertKey))
	for k, v := range data {
		g.Expect(string(v)).NotTo(ContainSubstring(string(ca.KeyPair.Key)), k)
	}

	server, err := tlsCert(data[EtcdServerCertKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(server.VerifyHostname(etcdHost("demo", "team-a", 0))).To(Succeed())
	g.Expect(server.VerifyHostname("demo-etcd-2.demo-etcd.team-a.svc")).To(Succeed())
	g.Expect(server.VerifyHostname("demo-etcd-0.demo-etcd.team-b.svc")).NotTo(Succeed())

	// Made anew: for another namespace, near their end, or after the CA changed.
	g.Expect(EtcdCertificatesCurrent(data, "demo", "team-b", ca.KeyPair.Cert, now)).To(BeFalse())
	g.Expect(EtcdCertificatesCurrent(data, "demo", "team-a", ca.KeyPair.Cert, now.Add(300*24*time.Hour))).To(BeFalse())
	other := secret.NewCertificatesForInitialControlPlane(nil).GetByPurpose(secret.EtcdCA)
	g.Expect(other.Generate()).To(Succeed())
	g.Expect(EtcdCertificatesCurrent(data, "demo", "team-a", other.KeyPair.Cert, now)).To(BeFalse())
	delete(data, EtcdPeerKeyKey)
	data[EtcdPeerCertKey] = []byte("garbage")
	g.Expect(EtcdCertificatesCurrent(data, "demo", "team-a", ca.KeyPair.Cert, now)).To(BeFalse())
}

func tlsCert(pem []byte) (*x509.Certificate, error) { return certs.DecodeCertPEM(pem) }

// A restore stops etcd by scaling it to zero; everything else of the StatefulSet,
// its claim template above all, stays as it was, so the member comes back on it.
func TestEtcdStoppedKeepsEverythingButTheMember(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.EtcdStorageClass = ptr.To("")
	running, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*running.Spec.Replicas).To(BeEquivalentTo(1))
	in.EtcdStopped = true
	stopped, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*stopped.Spec.Replicas).To(BeEquivalentTo(0))
	stopped.Spec.Replicas = running.Spec.Replicas
	g.Expect(stopped).To(Equal(running))
}

// Three members: one per pod and claim, each named in the initial cluster by its
// stable name; they start together, and the API server knows all three. One member
// (the default) keeps the pod template it had before etcd could have more.
func TestEtcdMembers(t *testing.T) {
	g := NewWithT(t)
	in := input()
	in.EtcdStorageClass = ptr.To("")
	one, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*one.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(one.Spec.PodManagementPolicy).To(BeEmpty())
	g.Expect(one.Spec.Template.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "ETCD_INITIAL_CLUSTER_STATE")),
		"a member alone is never replaced")
	g.Expect(one.Spec.Template.Spec.Containers[0].Command).To(ContainElements(
		"--initial-cluster=demo-etcd-0=https://demo-etcd-0.demo-etcd.team-a.svc:2380",
		"--advertise-client-urls=https://demo-etcd-0.demo-etcd.team-a.svc:2379"))
	g.Expect(in.Deployment("hash").Spec.Template.Spec.Containers[0].Command).To(
		ContainElement("--etcd-servers=https://demo-etcd-0.demo-etcd.team-a.svc:2379"))

	in.HCP.Spec.Etcd.Members = 3
	three, _, err := in.Etcd()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*three.Spec.Replicas).To(BeEquivalentTo(3))
	g.Expect(three.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	g.Expect(three.Spec.VolumeClaimTemplates).To(HaveLen(1), "a claim per member, from one template")
	// A member replaced on an empty volume joins once the controller made the
	// ConfigMap (which etcd ignores where a volume has data), and not before.
	g.Expect(three.Spec.Template.Spec.Containers[0].Env).To(ContainElement(And(
		HaveField("Name", "ETCD_INITIAL_CLUSTER_STATE"),
		HaveField("ValueFrom.ConfigMapKeyRef.Name", EtcdJoinName("demo")),
		HaveField("ValueFrom.ConfigMapKeyRef.Optional", HaveValue(BeTrue())))))
	g.Expect(in.EtcdJoin().Data).To(Equal(map[string]string{"ETCD_INITIAL_CLUSTER_STATE": "existing"}))
	g.Expect(three.Spec.Template.Spec.Containers[0].Command).NotTo(ContainElement(HavePrefix("--initial-cluster-state")),
		"a flag would shadow the ConfigMap")
	g.Expect(three.Spec.Template.Spec.Containers[0].Command).To(ContainElements(
		"--initial-cluster=demo-etcd-0=https://demo-etcd-0.demo-etcd.team-a.svc:2380,"+
			"demo-etcd-1=https://demo-etcd-1.demo-etcd.team-a.svc:2380,demo-etcd-2=https://demo-etcd-2.demo-etcd.team-a.svc:2380",
		"--initial-advertise-peer-urls=https://$(POD_NAME).demo-etcd.team-a.svc:2380",
		"--advertise-client-urls=https://$(POD_NAME).demo-etcd.team-a.svc:2379"))
	g.Expect(in.Deployment("hash").Spec.Template.Spec.Containers[0].Command).To(ContainElement(
		"--etcd-servers=https://demo-etcd-0.demo-etcd.team-a.svc:2379,https://demo-etcd-1.demo-etcd.team-a.svc:2379,https://demo-etcd-2.demo-etcd.team-a.svc:2379"))
	g.Expect(EtcdMember("demo", "team-a", 2)).To(Equal(backup.Member{Name: "demo-etcd-2", PeerURL: "https://demo-etcd-2.demo-etcd.team-a.svc:2380"}))
	g.Expect(EtcdClaimName("demo", 2)).To(Equal("data-demo-etcd-2"))

	// Members reach each other's peer port; nothing else does.
	peers := in.Policies()[0].Spec.Ingress[1]
	g.Expect(peers.From).To(ConsistOf(HaveField("PodSelector.MatchLabels", selector("demo", ComponentEtcd))))
	g.Expect(peers.Ports).To(ConsistOf(HaveField("Port.IntVal", BeEquivalentTo(EtcdPeerPort))))
}
