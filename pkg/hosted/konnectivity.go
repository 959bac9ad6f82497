package hosted

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Konnectivity carries the API server's traffic to the tenant (kubelets for logs,
// exec and port-forward; webhooks, aggregated APIs and Services) through agents in
// the tenant that dial out to a server beside the API server: the host's pods cannot
// route to the tenant's pod and Service networks.
const (
	KonnectivityPort    = 8132
	konnectivityVersion = "v0.33.0"
	konnectivityServer  = "registry.k8s.io/kas-network-proxy/proxy-server:" + konnectivityVersion
	// KonnectivityAgentImage is preloaded on every node image (images/build.sh).
	KonnectivityAgentImage = "registry.k8s.io/kas-network-proxy/proxy-agent:" + konnectivityVersion

	konnectivitySocketDir = "/run/konnectivity"
	konnectivitySocket    = konnectivitySocketDir + "/konnectivity-server.socket"
	// konnectivityUser is the server's identity toward the tenant API server, where it
	// reviews the agents' tokens.
	konnectivityUser     = "system:konnectivity-server"
	konnectivityAudience = "system:konnectivity-server"
	agentName            = "konnectivity-agent"
	agentManifest        = "konnectivity-agent.yaml"
)

// KonnectivityName is the ClusterResourceSet and ConfigMap of the agent.
func KonnectivityName(cluster string) string { return cluster + "-konnectivity" }

// egressSelectorConfiguration sends the API server's traffic to what the tenant
// names through the konnectivity server's socket into the tenant: `cluster` (kubelets,
// Services, webhooks and aggregated APIs by Service) and `controlplane` (webhooks by
// URL, admission and CRD conversion alike), which would otherwise be dialled from the
// host's pod network, a scan of the host from inside a tenant. Only etcd is reached
// directly; the pods' egress policy (Policies) allows nothing else.
const egressSelectorConfiguration = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: ` + konnectivitySocket + `
- name: controlplane
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: ` + konnectivitySocket + `
`

// konnectivityServerContainer runs beside kube-apiserver, on a socket they share; it
// serves the agents on the API server's certificate.
func (in Input) konnectivityServerContainer(kc, pki corev1.VolumeMount) corev1.Container {
	flags := map[string]string{
		"logtostderr":              "true",
		"uds-name":                 konnectivitySocket,
		"delete-existing-uds-file": "true",
		"cluster-cert":             "/etc/kubernetes/pki/apiserver.crt",
		"cluster-key":              "/etc/kubernetes/pki/apiserver.key",
		"mode":                     "grpc",
		"server-port":              "0",
		"agent-port":               strconv.Itoa(KonnectivityPort),
		"admin-port":               "8133",
		"health-port":              "8134",
		"agent-namespace":          "kube-system",
		"agent-service-account":    agentName,
		"kubeconfig":               "/kubeconfig/konnectivity-server.conf",
		"authentication-audience":  konnectivityAudience,
		"server-count":             strconv.Itoa(int(ptr.Deref(in.HCP.Spec.Replicas, 1))),
	}
	return corev1.Container{
		Name: "konnectivity-server", Image: konnectivityServer, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:      append([]string{"/proxy-server"}, args(flags)...),
		Resources:    withDefaults(in.HCP.Spec.KonnectivityServer.Resources, konnectivityDefaults),
		Ports:        []corev1.ContainerPort{{Name: "konnectivity", ContainerPort: KonnectivityPort, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: []corev1.VolumeMount{pki, kc, mount("konnectivity", konnectivitySocketDir)},
	}
}

// Konnectivity is the agent in the tenant, applied by Cluster API's
// ClusterResourceSet once the control plane is initialized (its address is the
// Service's, known only on the host): a DaemonSet on the node network, so it runs
// before the CNI and reaches kubelets, pods and Services alike; its service account
// token is for the server's audience only, and the server may review it.
func (in Input) Konnectivity() (*corev1.ConfigMap, *addonsv1.ClusterResourceSet, error) {
	labels := map[string]string{"k8s-app": agentName}
	ep := in.Endpoint()
	objs := []runtime.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: agentName, Namespace: metav1.NamespaceSystem},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "knest:konnectivity-server"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: konnectivityUser}},
		},
		&appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Name: agentName, Namespace: metav1.NamespaceSystem, Labels: labels},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						PriorityClassName:  "system-node-critical",
						ServiceAccountName: agentName,
						HostNetwork:        true,
						DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
						Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{
							Name: agentName, Image: KonnectivityAgentImage, ImagePullPolicy: corev1.PullIfNotPresent,
							Command: []string{"/proxy-agent",
								"--logtostderr=true",
								"--ca-cert=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
								"--proxy-server-host=" + ep.Host,
								"--proxy-server-port=" + strconv.Itoa(KonnectivityPort),
								"--admin-server-port=8133",
								"--health-server-port=8134",
								"--service-account-token-path=/var/run/secrets/tokens/" + agentName + "-token",
							},
							Resources:    requests("5m", "16Mi"),
							VolumeMounts: []corev1.VolumeMount{{Name: agentName + "-token", MountPath: "/var/run/secrets/tokens"}},
						}},
						Volumes: []corev1.Volume{{Name: agentName + "-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
							Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
								Path: agentName + "-token", Audience: konnectivityAudience, ExpirationSeconds: ptr.To[int64](3600),
							}}},
						}}}},
					},
				},
			},
		},
	}
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to render the konnectivity agent: %w", err)
		}
		docs = append(docs, string(b))
	}
	name := KonnectivityName(in.Cluster)
	meta := in.meta(name, "")
	// knest's controller caches only its own ConfigMaps.
	meta.Labels[knestv1.ClusterNameLabel] = in.Cluster
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{agentManifest: strings.Join(docs, "---\n")},
	}
	crs := &addonsv1.ClusterResourceSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: addonsv1.GroupVersion.String(), Kind: "ClusterResourceSet"},
		ObjectMeta: in.meta(name, ""),
		Spec: addonsv1.ClusterResourceSetSpec{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{knestv1.ClusterNameLabel: in.Cluster}},
			Resources:       []addonsv1.ResourceRef{{Kind: "ConfigMap", Name: name}},
			// Reconcile: a changed agent (its server's address, a new version) is applied again.
			Strategy: string(addonsv1.ClusterResourceSetStrategyReconcile),
		},
	}
	return cm, crs, nil
}
