// Package hosted renders the host objects of a HostedControlPlane: the tenant's
// etcd (a StatefulSet), its kube-apiserver, kube-controller-manager and
// kube-scheduler (one Deployment, a pod per API server replica), the Service in front
// of them, the NetworkPolicies that fence them, and the Job that runs kubeadm's
// phases against the new API server so that `kubeadm join` works in the worker VMs.
//
// kubeadm is the engine, in the tenant version's own binary (the image
// knest.local/kubeadm:<version>, which the node image build makes): an init
// container in each pod makes that pod's certificates and kubeconfigs with `kubeadm
// init phase certs|kubeconfig` from Cluster API's CA Secrets, and the Job uploads
// kubeadm-config and kubelet-config, creates cluster-info and the bootstrap-token
// RBAC, and installs kube-proxy and CoreDNS. The flags of the components follow
// kubeadm's static pod manifests; they are rendered here because kubeadm writes
// static pods, not Deployments.
package hosted

import (
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/podsec"
)

// Ports.
const (
	APIServerPort = 6443
	EtcdPort      = 2379
	EtcdPeerPort  = 2380
	etcdMetrics   = 2381
)

// Component labels on the pods.
const (
	ComponentLabel     = "controlplane.knest.dev/component"
	ComponentAPIServer = "apiserver"
	ComponentEtcd      = "etcd"
	ComponentKubeadm   = "kubeadm"
	// VersionAnnotation on the control-plane pods is the version they run.
	VersionAnnotation = "controlplane.knest.dev/version"
)

// componentImage is a control-plane image as kubeadm lists it for the version;
// images/build.sh makes them and hack/kind/up.sh preloads them.
func componentImage(name, version string) string {
	return "registry.k8s.io/" + name + ":" + version
}

// Names of the host objects of a cluster's hosted control plane.
func ServiceName(cluster string) string    { return cluster + "-apiserver" }
func DeploymentName(cluster string) string { return cluster + "-control-plane" }
func EtcdName(cluster string) string       { return cluster + "-etcd" }
func ConfigMapName(cluster string) string  { return cluster + "-kubeadm" }
func EtcdPolicyName(cluster string) string { return cluster + "-etcd" }
func APIPolicyName(cluster string) string  { return cluster + "-control-plane" }

// EtcdSelector selects the cluster's etcd pods.
func EtcdSelector(cluster string) map[string]string { return selector(cluster, ComponentEtcd) }

// APIServerSelector selects the cluster's API server pods.
func APIServerSelector(cluster string) map[string]string {
	return selector(cluster, ComponentAPIServer)
}

// PodReady: the pod is ready and not going, so its Service sends new connections
// to it.
func PodReady(p *corev1.Pod) bool {
	if !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EtcdMembers is the number of members of a hosted etcd.
func EtcdMembers(hcp *hcpv1.HostedControlPlane) int { return max(1, int(hcp.Spec.Etcd.Members)) }

// EtcdMember is member i's identity, as its pod (the StatefulSet's i-th) runs it.
func EtcdMember(cluster, ns string, i int) backup.Member {
	return backup.Member{Name: etcdPodName(cluster, i), PeerURL: "https://" + etcdHost(cluster, ns, i) + ":" + strconv.Itoa(EtcdPeerPort)}
}

// EtcdClaimName is member i's data claim, as the StatefulSet controller names it.
func EtcdClaimName(cluster string, i int) string { return "data-" + etcdPodName(cluster, i) }

func etcdPodName(cluster string, i int) string { return EtcdName(cluster) + "-" + strconv.Itoa(i) }

// etcdHost is member i's stable name under the headless Service.
func etcdHost(cluster, ns string, i int) string {
	return etcdPodName(cluster, i) + "." + EtcdName(cluster) + "." + ns + ".svc"
}

// etcdClientURLs are every member's client URL, as kube-apiserver's --etcd-servers.
func etcdClientURLs(cluster, ns string, n int) string {
	urls := make([]string, n)
	for i := range n {
		urls[i] = "https://" + net.JoinHostPort(etcdHost(cluster, ns, i), strconv.Itoa(EtcdPort))
	}
	return strings.Join(urls, ",")
}

func selector(cluster, component string) map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: cluster, ComponentLabel: component}
}

// Input is what rendering needs besides the HostedControlPlane.
type Input struct {
	HCP     *hcpv1.HostedControlPlane
	Cluster string
	// ServiceIP is the API server Service's cluster IP: the address the tenant's
	// VMs, kubeadm's kubeconfigs and the `kubernetes` Service in the tenant use.
	ServiceIP string
	// EtcdStorageClass is the class of etcd's volume (empty: the host's default);
	// nil means an emptyDir, which the controller uses only when the spec asks.
	EtcdStorageClass *string
	// EtcdStopped scales etcd to zero members (a restore writes its volume).
	EtcdStopped bool
	// HostSlowdown is how many times slower than hardware speed the host runs
	// (`knest controller --host-slowdown`; below 1 means 1): it stretches the
	// time the API server and etcd are given to start.
	HostSlowdown int
}

// startupProbe gives a container StartupSeconds (times the host's slowdown) to
// answer path before its liveness probe may restart it. With a fixed delay instead,
// a host starting many control planes at once restarted API servers that were slow,
// not stuck, and each restart began the slow start again.
func (in Input) startupProbe(handler corev1.ProbeHandler) *corev1.Probe {
	const period = 10
	return &corev1.Probe{
		ProbeHandler: handler, PeriodSeconds: period, TimeoutSeconds: 15,
		FailureThreshold: int32(StartupSeconds * max(in.HostSlowdown, 1) / period),
	}
}

// StartupSeconds is how long, at hardware speed, the API server and etcd have to
// start before their liveness probes count.
const StartupSeconds = 300

func (in Input) ns() string { return in.HCP.Namespace }

func (in Input) meta(name, component string) metav1.ObjectMeta {
	labels := map[string]string{clusterv1.ClusterNameLabel: in.Cluster}
	if component != "" {
		labels[ComponentLabel] = component
	}
	return metav1.ObjectMeta{Name: name, Namespace: in.ns(), Labels: labels}
}

// Endpoint is the tenant API endpoint: a fixed host, or the Service's cluster IP.
func (in Input) Endpoint() clusterv1.APIEndpoint {
	host := in.HCP.Spec.Service.Host
	if host == "" {
		host = in.ServiceIP
	}
	return clusterv1.APIEndpoint{Host: host, Port: APIServerPort}
}

// Volumes with Cluster API's certificate Secrets (KCP's names, made with its
// util/secret), copied into kubeadm's layout by prepareScript.
func secretVolume(name, secretName string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// inMemory is an emptyDir in the node's memory (tmpfs), for keys.
func inMemory(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
}

// nonRootUser runs every container of the API server pods, etcd and the kubeadm
// Job: the distroless user of Kubernetes', etcd's and konnectivity's images. One
// user for all, so that the keys kubeadm writes (mode 0600) in the init container
// are readable by the servers, and by no other user.
const nonRootUser = podsec.NonRootUID

// restrictedPod and restrictedContainer are the Pod Security Standards' restricted
// profile (pkg/podsec) for nonRootUser.
func restrictedPod() *corev1.PodSecurityContext { return podsec.Pod(nonRootUser) }

func restrictedContainer() *corev1.SecurityContext { return podsec.Container() }

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path}
}

func podEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
}

func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

func args(flags map[string]string) []string {
	out := make([]string, 0, len(flags))
	for k, v := range flags {
		out = append(out, "--"+k+"="+v)
	}
	// Stable order, so an unchanged spec renders an unchanged pod template.
	slices.Sort(out)
	return out
}
