package hosted

import (
	_ "embed"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/secret"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/pkg/placement"
)

// certsScript makes the pod's certificates and the components' kubeconfigs.
// kubeadm points the kubeconfigs at the advertised address (the Service); the
// components talk to the API server in their own pod instead.
//
//go:embed scripts/certs.sh
var certsScriptTemplate string

var certsScript = strings.NewReplacer(
	"@KONNECTIVITY_USER@", konnectivityUser,
	"@API_SERVER_PORT@", strconv.Itoa(APIServerPort),
).Replace(certsScriptTemplate)

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
			Selector: APIServerSelector(cluster),
			Ports: []corev1.ServicePort{
				{Name: "https", Port: APIServerPort, TargetPort: intstr.FromInt32(APIServerPort), Protocol: corev1.ProtocolTCP},
				{Name: "konnectivity", Port: KonnectivityPort, TargetPort: intstr.FromInt32(KonnectivityPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
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
	readiness := probe("/readyz")
	readiness.FailureThreshold = 3
	liveness := probe("/livez")
	startup := in.startupProbe(liveness.ProbeHandler)
	podLabels := APIServerSelector(c)
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
					Affinity:                     placement.SpreadAcrossHosts(podLabels),
					InitContainers: []corev1.Container{kubeadmContainer("certs", v, certsScript,
						mount("ca", "/secrets/ca"), mount("proxy", "/secrets/proxy"), mount("etcd-ca", "/secrets/etcd"),
						mount("sa", "/secrets/sa"), mount("config", "/config"), pki, kc, mount("tmp", "/tmp"))},
					Containers: []corev1.Container{
						{
							Name: "kube-apiserver", Image: componentImage("kube-apiserver", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-apiserver"}, args(apiserver)...), Resources: withDefaults(s.Resources, apiServerDefaults),
							Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: APIServerPort, Protocol: corev1.ProtocolTCP}},
							ReadinessProbe: readiness, LivenessProbe: liveness, StartupProbe: startup,
							VolumeMounts: []corev1.VolumeMount{pki, mount("config", "/config"), mount("konnectivity", konnectivitySocketDir)},
						},
						in.konnectivityServerContainer(kc, pki),
						{
							Name: "kube-controller-manager", Image: componentImage("kube-controller-manager", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-controller-manager"}, args(controllerManager)...), Resources: withDefaults(s.ControllerManager.Resources, controllerManagerDefaults),
							VolumeMounts: []corev1.VolumeMount{pki, kc},
						},
						{
							Name: "kube-scheduler", Image: componentImage("kube-scheduler", v), ImagePullPolicy: corev1.PullIfNotPresent,
							Command: append([]string{"kube-scheduler"}, args(scheduler)...), Resources: withDefaults(s.Scheduler.Resources, schedulerDefaults),
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
