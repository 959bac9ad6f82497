package hosted

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/blang/semver/v4"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/types/upstream"
	"sigs.k8s.io/cluster-api/util/secret"
)

// kubeadmImage is the tenant version's kubeadm (the node image build makes it).
func kubeadmImage(version string) string { return "knest.local/kubeadm:" + version }

func jobName(cluster, hash string) string { return cluster + "-kubeadm-" + hash[:8] }

// KubeadmConfig is kubeadm's configuration for every phase, with @POD_IP@ and
// @POD_NAME@ filled in by each pod.
func (in Input) KubeadmConfig() (*corev1.ConfigMap, error) {
	s := in.HCP.Spec
	ns := in.ns()
	svc := ServiceName(in.Cluster)
	etcdSANs := []string{etcdHost(in.Cluster, ns, 0), EtcdName(in.Cluster) + "." + ns + ".svc", "localhost", "127.0.0.1"}
	apiSANs := append([]string{svc, svc + "." + ns, svc + "." + ns + ".svc", "localhost", "127.0.0.1", in.ServiceIP}, s.Service.CertSANs...)
	if s.Service.Host != "" {
		apiSANs = append(apiSANs, s.Service.Host)
	}
	ep := in.Endpoint()
	version, err := semver.ParseTolerant(s.Version)
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", s.Version, err)
	}
	// Cluster API's kubeadm types, marshalled to the kubeadm API of the version as
	// CABPK writes them.
	initCfg, err := kubeadmtypes.MarshalInitConfigurationForVersion(&bootstrapv1.InitConfiguration{
		LocalAPIEndpoint: bootstrapv1.APIEndpoint{AdvertiseAddress: in.ServiceIP, BindPort: APIServerPort},
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name: "@POD_NAME@", CRISocket: "unix:///var/run/containerd/containerd.sock", ImagePullPolicy: corev1.PullIfNotPresent,
		},
	}, version)
	if err != nil {
		return nil, err
	}
	clusterCfg, err := kubeadmtypes.MarshalClusterConfigurationForVersion(&bootstrapv1.ClusterConfiguration{
		ControlPlaneEndpoint: net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))),
		CertificatesDir:      "/etc/kubernetes/pki",
		APIServer:            bootstrapv1.APIServer{CertSANs: apiSANs},
		Etcd: bootstrapv1.Etcd{Local: bootstrapv1.LocalEtcd{
			DataDir: "/var/lib/etcd", ServerCertSANs: etcdSANs, PeerCertSANs: etcdSANs,
		}},
	}, version, &upstream.AdditionalData{
		KubernetesVersion: &s.Version, ClusterName: &in.Cluster,
		DNSDomain: &s.Network.DNSDomain, ServiceSubnet: &s.Network.ServiceCIDR, PodSubnet: &s.Network.PodCIDR,
	})
	if err != nil {
		return nil, err
	}
	cfg := initCfg + "---\n" + clusterCfg
	meta := in.meta(ConfigMapName(in.Cluster), "")
	// knest's controller caches only its own ConfigMaps: without the label its apply
	// would never find this one, and write it on every reconcile.
	meta.Labels[knestv1.ClusterNameLabel] = in.Cluster
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{"kubeadm.yaml": cfg, "egress-selector.yaml": egressSelectorConfiguration},
	}, nil
}

// prepareScript lays Cluster API's Secrets out as kubeadm's certificate directory
// and fills the pod's address and name into kubeadm's configuration.
//
//go:embed scripts/prepare.sh
var prepareScript string

func kubeadmContainer(name, version, script string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           kubeadmImage(version),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/sh", "-c", prepareScript + script},
		Env:             podEnv(),
		Resources:       *kubeadmDefaults.DeepCopy(),
		VolumeMounts:    mounts,
	}
}

// tenantBootstrapScript runs kubeadm's phases that give the tenant what `kubeadm
// join` reads and the add-ons a kubeadm control plane installs. Each phase creates
// or updates, so the Job runs again, unchanged, after an upgrade.
//
// The phases use kubeadm's default admin.conf, as `kubeadm init` does: kubeadm then
// binds its kubeadm:cluster-admins group (with super-admin.conf), which the API
// server's kubelet client certificate is in, so kubelets answer it (logs, exec).
//
//go:embed scripts/tenant-bootstrap.sh
var tenantBootstrapScript string

// Job runs tenantBootstrapScript with the version's kubeadm, restricted as the API
// server pod is (its files in memory). hash names the inputs (version,
// configuration), so a changed input makes a new Job; so does a changed pod
// template, which a Job cannot take (the phases then run again, unchanged).
func (in Input) Job(hash string) *batchv1.Job {
	c := in.Cluster
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: selector(c, ComponentKubeadm)},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyOnFailure,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              restrictedPod(),
			Containers: []corev1.Container{kubeadmContainer("kubeadm", in.HCP.Spec.Version, tenantBootstrapScript,
				mount("ca", "/secrets/ca"), mount("config", "/config"), mount("kubernetes", "/etc/kubernetes"), mount("tmp", "/tmp"))},
			Volumes: []corev1.Volume{
				secretVolume("ca", secret.Name(c, secret.ClusterCA)),
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(c)},
				}}},
				inMemory("kubernetes"), inMemory("tmp"),
			},
		},
	}
	template.Spec.Containers[0].SecurityContext = restrictedContainer()
	raw, err := json.Marshal(template)
	if err != nil {
		panic(err) // a pod template always marshals
	}
	sum := sha256.Sum256(append([]byte(hash), raw...))
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: in.meta(jobName(c, hex.EncodeToString(sum[:])), ComponentKubeadm),
		Spec: batchv1.JobSpec{
			// Kubernetes' default; then the controller reports the failure and makes
			// the Job anew after a backoff of its own.
			BackoffLimit: ptr.To[int32](6),
			Template:     template,
		},
	}
}

// JobSelector selects the cluster's kubeadm Jobs.
func JobSelector(cluster string) map[string]string { return selector(cluster, ComponentKubeadm) }
