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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/types/upstream"
	"sigs.k8s.io/cluster-api/util/secret"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/netpol"
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

// Image references. The control-plane images are the ones kubeadm lists for the
// version; images/build.sh makes them and hack/kind/up.sh preloads them.
func kubeadmImage(version string) string { return "knest.local/kubeadm:" + version }
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
func jobName(cluster, hash string) string  { return cluster + "-kubeadm-" + hash[:8] }

// EtcdSelector selects the cluster's etcd pods.
func EtcdSelector(cluster string) map[string]string { return selector(cluster, ComponentEtcd) }

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
}

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

// Service is the API server's Service; its cluster IP is allocated before anything
// else is rendered, because every certificate and kubeconfig names it.
func Service(hcp *hcpv1.HostedControlPlane, cluster string) *corev1.Service {
	in := Input{HCP: hcp, Cluster: cluster}
	t := hcp.Spec.Service.Type
	if t == "" {
		t = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(ServiceName(cluster), ""),
		Spec: corev1.ServiceSpec{
			Type:     t,
			Selector: selector(cluster, ComponentAPIServer),
			Ports: []corev1.ServicePort{
				{Name: "https", Port: APIServerPort, TargetPort: intstr.FromInt32(APIServerPort), Protocol: corev1.ProtocolTCP},
				{Name: "konnectivity", Port: KonnectivityPort, TargetPort: intstr.FromInt32(KonnectivityPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

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
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: in.meta(ConfigMapName(in.Cluster), ""),
		Data:       map[string]string{"kubeadm.yaml": cfg, "egress-selector.yaml": egressSelectorConfiguration},
	}, nil
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

// nonRootUser runs every container of the API server pods and the kubeadm Job: the
// distroless user of Kubernetes' and konnectivity's images. One user for all, so that
// the keys kubeadm writes (mode 0600) in the init container are readable by the
// servers, and by no other user.
const nonRootUser = 65532

// restrictedPod and restrictedContainer are the Pod Security Standards' restricted
// profile: no root, no privilege escalation, no capabilities, the runtime's seccomp
// profile; and a read-only root file system, the writable paths being volumes.
func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](nonRootUser), RunAsGroup: ptr.To[int64](nonRootUser),
		FSGroup:        ptr.To[int64](nonRootUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path}
}

// prepareScript lays Cluster API's Secrets out as kubeadm's certificate directory
// and fills the pod's address and name into kubeadm's configuration.
const prepareScript = `set -eu
mkdir -p /tmp /etc/kubernetes/pki/etcd
cp /secrets/ca/tls.crt /etc/kubernetes/pki/ca.crt; cp /secrets/ca/tls.key /etc/kubernetes/pki/ca.key
[ ! -d /secrets/proxy ] || { cp /secrets/proxy/tls.crt /etc/kubernetes/pki/front-proxy-ca.crt; cp /secrets/proxy/tls.key /etc/kubernetes/pki/front-proxy-ca.key; }
[ ! -d /secrets/etcd ] || { cp /secrets/etcd/tls.crt /etc/kubernetes/pki/etcd/ca.crt; cp /secrets/etcd/tls.key /etc/kubernetes/pki/etcd/ca.key; }
[ ! -d /secrets/sa ] || { cp /secrets/sa/tls.crt /etc/kubernetes/pki/sa.pub; cp /secrets/sa/tls.key /etc/kubernetes/pki/sa.key; }
sed -e "s/@POD_IP@/${POD_IP:-}/g" -e "s/@POD_NAME@/${POD_NAME:-kubeadm}/g" /config/kubeadm.yaml >/tmp/kubeadm.yaml
`

func podEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
}

func kubeadmContainer(name, version, script string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           kubeadmImage(version),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/sh", "-c", prepareScript + script},
		Env:             podEnv(),
		VolumeMounts:    mounts,
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

// Leader election as the VM control planes have it (pkg/cluster): a tenant's
// components share oversubscribed hosts.
var leaderElection = map[string]string{
	"leader-elect":                "true",
	"leader-elect-lease-duration": "60s",
	"leader-elect-renew-deadline": "45s",
	"leader-elect-retry-period":   "5s",
}

// Deployment runs a pod per API server replica: kube-apiserver with
// kube-controller-manager and kube-scheduler beside it (leader-elected), as Kamaji
// does; one pod per replica keeps an idle tenant at three processes.
func (in Input) Deployment(configHash string) *appsv1.Deployment {
	s := in.HCP.Spec
	c := in.Cluster
	v := s.Version
	apiserver := map[string]string{
		"advertise-address":                  in.ServiceIP,
		"allow-privileged":                   "true",
		"authorization-mode":                 "Node,RBAC",
		"client-ca-file":                     "/etc/kubernetes/pki/ca.crt",
		"enable-admission-plugins":           "NodeRestriction",
		"enable-bootstrap-token-auth":        "true",
		"egress-selector-config-file":        "/config/egress-selector.yaml",
		"etcd-cafile":                        "/etc/kubernetes/pki/etcd/ca.crt",
		"etcd-certfile":                      "/etc/kubernetes/pki/apiserver-etcd-client.crt",
		"etcd-keyfile":                       "/etc/kubernetes/pki/apiserver-etcd-client.key",
		"etcd-servers":                       etcdClientURLs(c, in.ns(), EtcdMembers(in.HCP)),
		"kubelet-client-certificate":         "/etc/kubernetes/pki/apiserver-kubelet-client.crt",
		"kubelet-client-key":                 "/etc/kubernetes/pki/apiserver-kubelet-client.key",
		"kubelet-preferred-address-types":    "InternalIP,ExternalIP,Hostname",
		"proxy-client-cert-file":             "/etc/kubernetes/pki/front-proxy-client.crt",
		"proxy-client-key-file":              "/etc/kubernetes/pki/front-proxy-client.key",
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-client-ca-file":       "/etc/kubernetes/pki/front-proxy-ca.crt",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-username-headers":     "X-Remote-User",
		"secure-port":                        strconv.Itoa(APIServerPort),
		"service-account-issuer":             "https://kubernetes.default.svc." + s.Network.DNSDomain,
		"service-account-key-file":           "/etc/kubernetes/pki/sa.pub",
		"service-account-signing-key-file":   "/etc/kubernetes/pki/sa.key",
		"service-cluster-ip-range":           s.Network.ServiceCIDR,
		// Behind a Service, a stopping API server keeps serving (its /readyz failing)
		// until the endpoint is gone from every kube-proxy; without it a rollout
		// refused connections for a moment.
		"shutdown-delay-duration": "10s",
		"tls-cert-file":           "/etc/kubernetes/pki/apiserver.crt",
		"tls-private-key-file":    "/etc/kubernetes/pki/apiserver.key",
	}
	controllerManager := map[string]string{
		"allocate-node-cidrs":              "true",
		"authentication-kubeconfig":        "/kubeconfig/controller-manager.conf",
		"authorization-kubeconfig":         "/kubeconfig/controller-manager.conf",
		"bind-address":                     "127.0.0.1",
		"client-ca-file":                   "/etc/kubernetes/pki/ca.crt",
		"cluster-cidr":                     s.Network.PodCIDR,
		"cluster-name":                     c,
		"cluster-signing-cert-file":        "/etc/kubernetes/pki/ca.crt",
		"cluster-signing-key-file":         "/etc/kubernetes/pki/ca.key",
		"controllers":                      "*,bootstrapsigner,tokencleaner",
		"kubeconfig":                       "/kubeconfig/controller-manager.conf",
		"requestheader-client-ca-file":     "/etc/kubernetes/pki/front-proxy-ca.crt",
		"root-ca-file":                     "/etc/kubernetes/pki/ca.crt",
		"service-account-private-key-file": "/etc/kubernetes/pki/sa.key",
		"service-cluster-ip-range":         s.Network.ServiceCIDR,
		"use-service-account-credentials":  "true",
	}
	scheduler := map[string]string{
		"authentication-kubeconfig": "/kubeconfig/scheduler.conf",
		"authorization-kubeconfig":  "/kubeconfig/scheduler.conf",
		"bind-address":              "127.0.0.1",
		"kubeconfig":                "/kubeconfig/scheduler.conf",
	}
	for k, val := range leaderElection {
		controllerManager[k], scheduler[k] = val, val
	}
	pki, kc := mount("pki", "/etc/kubernetes/pki"), mount("kubeconfig", "/kubeconfig")
	// kubeadm points the components' kubeconfigs at the advertised address (the
	// Service); they talk to the API server in their own pod instead.
	certs := `for phase in apiserver apiserver-kubelet-client front-proxy-client apiserver-etcd-client; do
  kubeadm init phase certs $phase --config /tmp/kubeadm.yaml
done
for conf in controller-manager scheduler; do
  kubeadm init phase kubeconfig $conf --config /tmp/kubeadm.yaml --kubeconfig-dir /kubeconfig
done
kubeadm kubeconfig user --config /tmp/kubeadm.yaml --client-name ` + konnectivityUser + ` >/kubeconfig/konnectivity-server.conf
sed -i "s#server: .*#server: https://127.0.0.1:` + strconv.Itoa(APIServerPort) + `#" /kubeconfig/*.conf
`
	// The kubelet probes the pod's address; kube-controller-manager and
	// kube-scheduler serve on loopback only and restart themselves when they lose
	// their lease.
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(APIServerPort), Scheme: corev1.URISchemeHTTPS}},
			PeriodSeconds:    10,
			TimeoutSeconds:   15,
			FailureThreshold: 8,
		}
	}
	apiResources := s.Resources
	if len(apiResources.Requests) == 0 && len(apiResources.Limits) == 0 {
		apiResources = requests("50m", "256Mi")
	}
	readiness := probe("/readyz")
	readiness.FailureThreshold = 3
	liveness := probe("/livez")
	liveness.InitialDelaySeconds = 30
	podLabels := selector(c, ComponentAPIServer)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: in.meta(DeploymentName(c), ComponentAPIServer),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(s.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			// A surge pod costs little (no VM): an old pod goes only once a new one
			// serves, so even a single API server keeps serving through an upgrade or
			// a change of replicas (the konnectivity servers' count is in the template).
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      podLabels,
					Annotations: map[string]string{VersionAnnotation: v, "controlplane.knest.dev/config-hash": configHash},
				},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              restrictedPod(),
					InitContainers: []corev1.Container{kubeadmContainer("certs", v, certs,
						mount("ca", "/secrets/ca"), mount("proxy", "/secrets/proxy"), mount("etcd-ca", "/secrets/etcd"),
						mount("sa", "/secrets/sa"), mount("config", "/config"), pki, kc, mount("tmp", "/tmp"))},
					Containers: []corev1.Container{
						{
							Name: "kube-apiserver", Image: componentImage("kube-apiserver", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-apiserver"}, args(apiserver)...), Resources: apiResources,
							Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: APIServerPort, Protocol: corev1.ProtocolTCP}},
							ReadinessProbe: readiness, LivenessProbe: liveness,
							VolumeMounts: []corev1.VolumeMount{pki, mount("config", "/config"), mount("konnectivity", konnectivitySocketDir)},
						},
						in.konnectivityServerContainer(kc, pki),
						{
							Name: "kube-controller-manager", Image: componentImage("kube-controller-manager", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-controller-manager"}, args(controllerManager)...), Resources: requests("20m", "64Mi"),
							VolumeMounts: []corev1.VolumeMount{pki, kc},
						},
						{
							Name: "kube-scheduler", Image: componentImage("kube-scheduler", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-scheduler"}, args(scheduler)...), Resources: requests("10m", "32Mi"),
							VolumeMounts: []corev1.VolumeMount{kc},
						},
					},
					Volumes: []corev1.Volume{
						secretVolume("ca", secret.Name(c, secret.ClusterCA)),
						secretVolume("proxy", secret.Name(c, secret.FrontProxyCA)),
						secretVolume("etcd-ca", secret.Name(c, secret.EtcdCA)),
						secretVolume("sa", secret.Name(c, secret.ServiceAccount)),
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(c)},
						}}},
						// Keys and kubeconfigs in memory, never on the host's disk.
						inMemory("pki"), inMemory("kubeconfig"), inMemory("tmp"), emptyDir("konnectivity"),
					},
				},
			},
		},
	}
	for _, cs := range [][]corev1.Container{d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers} {
		for i := range cs {
			cs[i].SecurityContext = restrictedContainer()
		}
	}
	return d
}

// TenantBootstrapScript runs kubeadm's phases that give the tenant what `kubeadm
// join` reads and the add-ons a kubeadm control plane installs. Each phase creates
// or updates, so the Job runs again, unchanged, after an upgrade.
//
// The phases use kubeadm's default admin.conf, as `kubeadm init` does: kubeadm then
// binds its kubeadm:cluster-admins group (with super-admin.conf), which the API
// server's kubelet client certificate is in, so kubelets answer it (logs, exec).
const TenantBootstrapScript = `for conf in admin super-admin; do kubeadm init phase kubeconfig $conf --config /tmp/kubeadm.yaml; done
kubeadm init phase upload-config kubeadm --config /tmp/kubeadm.yaml
kubeadm init phase upload-config kubelet --config /tmp/kubeadm.yaml
kubeadm init phase bootstrap-token --config /tmp/kubeadm.yaml --skip-token-print
kubeadm init phase addon kube-proxy --config /tmp/kubeadm.yaml
kubeadm init phase addon coredns --config /tmp/kubeadm.yaml
`

// Job runs TenantBootstrapScript with the version's kubeadm, restricted as the API
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
			Containers: []corev1.Container{kubeadmContainer("kubeadm", in.HCP.Spec.Version, TenantBootstrapScript,
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

// Policies fence the control-plane pods both ways. In: only the cluster's own API
// server pods (and backup Jobs) reach its etcd, only its own members its peer port;
// the API server's and the konnectivity server's ports are open (the endpoint is
// meant to be reached, as a VM control plane's is: the tenant's VMs, Cluster API's and
// knest's controllers, users through a NodePort or load balancer), and nothing else of
// its pods is. Out: the API server pods reach their etcd and the host's DNS, nothing
// else of the host; whatever the tenant points them at (webhooks, aggregated APIs,
// conversion) goes through konnectivity's socket into the tenant (the egress
// selector). etcd's members reach each other and DNS. The VMs' own policy
// (pkg/cluster) lets them reach pods of their cluster.
func (in Input) Policies() []*networkingv1.NetworkPolicy {
	c := in.Cluster
	pods := func(component string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: selector(c, component)}}}
	}
	tcp := func(p int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{netpol.Port(corev1.ProtocolTCP, p)}
	}
	policy := func(name, component string, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: in.meta(name, ""),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector(c, component)},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress:     ingress,
				Egress:      egress,
			},
		}
	}
	return []*networkingv1.NetworkPolicy{
		policy(EtcdPolicyName(c), ComponentEtcd, []networkingv1.NetworkPolicyIngressRule{{
			From:  append(pods(ComponentAPIServer), networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: backup.Selector(c, backup.ComponentBackup)}}),
			Ports: tcp(EtcdPort),
		}, {
			// Members of a three-member etcd replicate to each other.
			From: pods(ComponentEtcd), Ports: tcp(EtcdPeerPort),
		}}, []networkingv1.NetworkPolicyEgressRule{
			{To: pods(ComponentEtcd), Ports: tcp(EtcdPeerPort)},
			netpol.DNSEgress(),
		}),
		policy(APIPolicyName(c), ComponentAPIServer, []networkingv1.NetworkPolicyIngressRule{{
			Ports: append(tcp(APIServerPort), tcp(KonnectivityPort)...),
		}}, []networkingv1.NetworkPolicyEgressRule{
			{To: pods(ComponentEtcd), Ports: tcp(EtcdPort)},
			netpol.DNSEgress(),
		}),
	}
}

// DisruptionBudgets let a host's node drain evict one API server pod and one etcd
// member at a time: three API servers keep two serving, three members keep their
// quorum; a single one may go (its Deployment surges, its data is on its claim).
func (in Input) DisruptionBudgets() []*policyv1.PodDisruptionBudget {
	budget := func(name, component string) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: in.meta(name, component),
			Spec: policyv1.PodDisruptionBudgetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: selector(in.Cluster, component)},
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			},
		}
	}
	return []*policyv1.PodDisruptionBudget{
		budget(DeploymentName(in.Cluster), ComponentAPIServer),
		budget(EtcdName(in.Cluster), ComponentEtcd),
	}
}
