package hosted

import (
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"

	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/placement"
)

// etcdImageTags is the etcd image of each minor the API accepts: the one kubeadm of
// that minor lists (`kubeadm config images list`, its constants.DefaultEtcdVersion)
// at the patch knest builds node images for, or, for minors without one, the
// newest kubeadm table that names the minor (v1.33.13's for 30, v1.34.4's for 31).
// images/build.sh checks it against the kubeadm it builds and stops on a
// difference, so the node image preloads the image a hosted etcd runs.
//
// Keyed by minor, not by patch: a patch upgrade never touches etcd's pod. A minor
// upgrade moves etcd only where kubeadm's table does.
var etcdImageTags = map[int]string{
	30: "3.5.24-0",
	31: "3.5.24-0",
	32: "3.5.24-0", // kubeadm v1.32.13
	33: "3.5.24-0", // kubeadm v1.33.13
	34: "3.6.5-0",  // kubeadm v1.34.4
	35: "3.6.6-0",  // kubeadm v1.35.4
	36: "3.6.8-0",  // kubeadm v1.36.3
}

// EtcdImage is the etcd image for a tenant version.
func EtcdImage(version string) (string, error) {
	v, err := kubever.Parse(version)
	if err != nil {
		return "", err
	}
	tag, ok := etcdImageTags[v.Minor]
	if !ok {
		return "", fmt.Errorf("knest has no etcd image for Kubernetes %s (it has for minors 30 to 36)", version)
	}
	return "registry.k8s.io/etcd:" + tag, nil
}

// EtcdCertsName is the Secret with etcd's serving and peer certificates, which
// the controller makes from Cluster API's etcd CA: the etcd pod then needs no CA
// key and no kubeadm, so its template changes only when etcd must.
func EtcdCertsName(cluster string) string { return cluster + "-etcd-certs" }

// Keys of the etcd certificate Secret.
const (
	EtcdCACertKey     = "ca.crt"
	EtcdServerCertKey = "server.crt"
	EtcdServerKeyKey  = "server.key"
	EtcdPeerCertKey   = "peer.crt"
	EtcdPeerKeyKey    = "peer.key"
)

// etcdAltNames are the names a member is reached by: its pod's stable name under
// the headless Service (every member's, for more than one), the Service, loopback.
func etcdAltNames(cluster, ns string) certs.AltNames {
	svc := EtcdName(cluster) + "." + ns + ".svc"
	return certs.AltNames{
		DNSNames: []string{"*." + svc, svc, "localhost"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
}

// etcdCert is one of etcd's certificates and the keys of the Secret it goes in.
type etcdCert struct {
	cfg             certs.Config
	certKey, keyKey string
}

// etcdCerts are etcd's serving and peer certificates, each also a client
// certificate, as kubeadm's are.
func etcdCerts(cluster, ns string) []etcdCert {
	cfg := func(cn string) certs.Config {
		return certs.Config{CommonName: cn, AltNames: etcdAltNames(cluster, ns),
			Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	}
	return []etcdCert{
		{cfg(EtcdName(cluster)), EtcdServerCertKey, EtcdServerKeyKey},
		{cfg(EtcdName(cluster) + "-peer"), EtcdPeerCertKey, EtcdPeerKeyKey},
	}
}

// EtcdCertificates makes the data of etcd's certificate Secret: a serving and a
// peer certificate signed by the cluster's etcd CA (Cluster API's `<cluster>-etcd`
// Secret, PEM).
func EtcdCertificates(cluster, ns string, caCertPEM, caKeyPEM []byte) (map[string][]byte, error) {
	ca := backup.EtcdCA{Cert: caCertPEM, Key: caKeyPEM}
	data := map[string][]byte{EtcdCACertKey: caCertPEM}
	for _, c := range etcdCerts(cluster, ns) {
		cert, key, err := ca.Sign(c.cfg)
		if err != nil {
			return nil, err
		}
		data[c.certKey], data[c.keyKey] = cert, key
	}
	return data, nil
}

// EtcdCertificatesCurrent tells whether data holds both certificates of this CA,
// for the names etcd needs, not to be made anew yet (backup.EtcdCA.Current).
func EtcdCertificatesCurrent(data map[string][]byte, cluster, ns string, caCertPEM []byte, now time.Time) bool {
	ca := backup.EtcdCA{Cert: caCertPEM}
	for _, c := range etcdCerts(cluster, ns) {
		if !ca.Current(data[c.certKey], c.cfg, now) {
			return false
		}
	}
	return string(data[EtcdCACertKey]) == string(caCertPEM)
}

// EtcdQuotaBytes is etcd's backend quota for a volume: three quarters of it, so
// the quota alarm (which keeps etcd readable and lets it be compacted and
// defragmented) fires before the disk is full, with room for the WAL and snapshots.
func EtcdQuotaBytes(volume resource.Quantity) int64 { return volume.Value() / 4 * 3 }

// DefaultEtcdVolume is etcd's volume size when the spec gives none.
var DefaultEtcdVolume = resource.MustParse("2Gi")

// Etcd is an etcd of EtcdMembers members, each on its own volume of the given
// class, or a one-member etcd on an emptyDir (nil class). Three members start in
// parallel (each waits for a quorum to be ready) and are replaced one at a time.
//
// Its pod template holds nothing of the tenant's Kubernetes version but etcd's
// image: certificates come from EtcdCertsName (renewed in place; etcd reads them
// at each handshake), so patch upgrades leave the member running.
func (in Input) Etcd() (*appsv1.StatefulSet, *corev1.Service, error) {
	s := in.HCP.Spec
	c := in.Cluster
	image, err := EtcdImage(s.Version)
	if err != nil {
		return nil, nil, err
	}
	members := EtcdMembers(in.HCP)
	livez := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromInt(etcdMetrics)}}
	// A member's own name under the headless Service; literal for one member, so
	// that clusters made before etcd had more keep their pod template.
	host := etcdHost(c, in.ns(), 0)
	if members > 1 {
		host = "$(POD_NAME)." + EtcdName(c) + "." + in.ns() + ".svc"
	}
	initial := make([]string, members)
	for i := range members {
		m := EtcdMember(c, in.ns(), i)
		initial[i] = m.Name + "=" + m.PeerURL
	}
	const pki = "/etc/etcd/pki/"
	flags := map[string]string{
		"name":                        "$(POD_NAME)",
		"data-dir":                    "/var/lib/etcd",
		"listen-client-urls":          "https://0.0.0.0:" + strconv.Itoa(EtcdPort),
		"advertise-client-urls":       "https://" + host + ":" + strconv.Itoa(EtcdPort),
		"listen-peer-urls":            "https://0.0.0.0:" + strconv.Itoa(EtcdPeerPort),
		"initial-advertise-peer-urls": "https://" + host + ":" + strconv.Itoa(EtcdPeerPort),
		"initial-cluster":             strings.Join(initial, ","),
		// Health for the kubelet's probes; the policy admits no one else.
		"listen-metrics-urls":   "http://0.0.0.0:" + strconv.Itoa(etcdMetrics),
		"client-cert-auth":      "true",
		"peer-client-cert-auth": "true",
		"cert-file":             pki + EtcdServerCertKey,
		"key-file":              pki + EtcdServerKeyKey,
		"trusted-ca-file":       pki + EtcdCACertKey,
		"peer-cert-file":        pki + EtcdPeerCertKey,
		"peer-key-file":         pki + EtcdPeerKeyKey,
		"peer-trusted-ca-file":  pki + EtcdCACertKey,
		"snapshot-count":        "10000",
		// As the VM control planes' etcd (pkg/cluster): oversubscribed hosts.
		"heartbeat-interval": "500",
		"election-timeout":   "10000",
	}
	size := DefaultEtcdVolume
	if s.Etcd.Size != nil {
		size = *s.Etcd.Size
	}
	if in.EtcdStorageClass != nil {
		// kube-apiserver compacts every 5 minutes; the quota keeps the file inside
		// the volume until it is defragmented.
		flags["quota-backend-bytes"] = strconv.FormatInt(EtcdQuotaBytes(size), 10)
	}
	labels := selector(c, ComponentEtcd)
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: in.meta(EtcdName(c), ComponentEtcd),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(int32(members)),
			ServiceName: EtcdName(c),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			// The volume outlives the StatefulSet (an accidental delete, a re-create
			// with other settings); the controller makes the HostedControlPlane its
			// owner, so deleting the cluster removes it.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					// Restricted as the API server pods are. fsGroup's default change
					// policy (Always) gives a volume written as root by an older knest
					// to the group, so those members keep their data.
					SecurityContext: restrictedPod(),
					// Members on different host nodes: their volumes are bound to the node
					// they were first scheduled on, so this is where they stay.
					Affinity: placement.SpreadAcrossHosts(labels),
					Containers: []corev1.Container{{
						Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: restrictedContainer(),
						Command:         append([]string{"etcd"}, args(flags)...),
						Env:             podEnv(),
						Resources:       withDefaults(s.Etcd.Resources, etcdDefaults),
						Ports:           []corev1.ContainerPort{{Name: "client", ContainerPort: EtcdPort}, {Name: "peer", ContainerPort: EtcdPeerPort}},
						VolumeMounts:    []corev1.VolumeMount{{Name: "certs", MountPath: pki, ReadOnly: true}, mount("data", "/var/lib/etcd")},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt(etcdMetrics)}},
							PeriodSeconds: 5, TimeoutSeconds: 15,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:  livez,
							PeriodSeconds: 10, TimeoutSeconds: 15, FailureThreshold: 8,
						},
						StartupProbe: in.startupProbe(livez),
					}},
					Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						// Owned by root, the pod's group (fsGroup) reads them.
						SecretName: EtcdCertsName(c), DefaultMode: ptr.To[int32](0o440),
					}}}},
				},
			},
		},
	}
	if members > 1 {
		// A member is ready only with a quorum: one at a time, the first would wait
		// for the others for ever. Rolling updates still go one member at a time.
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		// A member replaced on an empty volume joins (etcdmember.go).
		etcd := &sts.Spec.Template.Spec.Containers[0]
		etcd.Env = append(etcd.Env, etcdJoinEnv(c))
	}
	if in.EtcdStopped {
		sts.Spec.Replicas = ptr.To[int32](0)
	}
	if in.EtcdStorageClass == nil {
		sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes, emptyDir("data"))
	} else {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{clusterv1.ClusterNameLabel: c}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: in.EtcdStorageClass,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}}
		if *in.EtcdStorageClass == "" {
			// The host's default class, picked by the API server.
			sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName = nil
		}
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(EtcdName(c), ComponentEtcd),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 labels,
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				{Name: "client", Port: EtcdPort, TargetPort: intstr.FromInt32(EtcdPort), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: EtcdPeerPort, TargetPort: intstr.FromInt32(EtcdPeerPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	return sts, svc, nil
}

// EtcdClaimSelector selects the cluster's claims, etcd's among them (IsEtcdClaim).
func EtcdClaimSelector(cluster string) map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: cluster}
}

// IsEtcdClaim tells etcd's claims by the StatefulSet controller's names for them.
func IsEtcdClaim(cluster, claim string) bool {
	return strings.HasPrefix(claim, "data-"+EtcdName(cluster)+"-")
}
