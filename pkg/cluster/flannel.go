package cluster

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Flannel is the default tenant CNI. Its images are preloaded into the node image
// (images/), so a node never pulls them.
const (
	FlannelImage          = "ghcr.io/flannel-io/flannel:v0.28.10"
	FlannelCNIPluginImage = "ghcr.io/flannel-io/flannel-cni-plugin:v1.7.1-flannel1"
	// FlannelVXLANPort is not the default 4789: a host pod network that itself uses
	// VXLAN on 4789 (flannel, calico, cilium) would otherwise swallow tenant packets.
	FlannelVXLANPort = 8473

	flannelNamespace = "kube-flannel"
	flannelName      = "flannel"
	flannelManifest  = "flannel.yaml"
)

// flannelConfigMap is the ConfigMap the ClusterResourceSet applies to the tenant.
func (r renderer) flannelConfigMap() (*corev1.ConfigMap, error) {
	manifest, err := flannelObjects(r.nc.Spec.Network.PodCIDR)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   typeMeta(corev1.SchemeGroupVersion.WithKind("ConfigMap")),
		ObjectMeta: r.meta(CNIName(r.name), ""),
		Data:       map[string]string{flannelManifest: manifest},
	}, nil
}

// flannelObjects renders flannel's objects as one multi-document YAML.
func flannelObjects(podCIDR string) (string, error) {
	netConf, err := json.Marshal(map[string]any{
		"Network":    podCIDR,
		"EnableIPv4": true,
		"Backend":    map[string]any{"Type": "vxlan", "Port": FlannelVXLANPort},
	})
	if err != nil {
		return "", err
	}
	cniConf, err := json.Marshal(map[string]any{
		"name":       "cbr0",
		"cniVersion": "0.3.1",
		"plugins": []map[string]any{
			{"type": "flannel", "delegate": map[string]any{"hairpinMode": true, "isDefaultGateway": true}},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	})
	if err != nil {
		return "", err
	}
	labels := map[string]string{"app": flannelName}
	meta := metav1.ObjectMeta{Name: flannelName, Namespace: flannelNamespace, Labels: labels}
	hostPath := func(name, path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	privileged := true
	objs := []runtime.Object{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: flannelNamespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}},
		},
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: flannelName, Labels: labels},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: flannelName, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: flannelName},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: flannelName, Namespace: flannelNamespace}},
		},
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "kube-flannel-cfg", Namespace: flannelNamespace, Labels: labels},
			Data:       map[string]string{"cni-conf.json": string(cniConf), "net-conf.json": string(netConf)},
		},
		&appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "kube-flannel-ds", Namespace: flannelNamespace, Labels: labels},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						HostNetwork:        true,
						PriorityClassName:  "system-node-critical",
						ServiceAccountName: flannelName,
						Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
						InitContainers: []corev1.Container{
							{
								Name: "install-cni-plugin", Image: FlannelCNIPluginImage, ImagePullPolicy: corev1.PullIfNotPresent,
								Command:      []string{"cp", "-f", "/flannel", "/opt/cni/bin/flannel"},
								VolumeMounts: []corev1.VolumeMount{{Name: "cni-plugin", MountPath: "/opt/cni/bin"}},
							},
							{
								Name: "install-cni", Image: FlannelImage, ImagePullPolicy: corev1.PullIfNotPresent,
								Command:      []string{"cp", "-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"},
								VolumeMounts: []corev1.VolumeMount{{Name: "cni", MountPath: "/etc/cni/net.d"}, {Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"}},
							},
						},
						Containers: []corev1.Container{{
							Name: "kube-flannel", Image: FlannelImage, ImagePullPolicy: corev1.PullIfNotPresent,
							// flanneld checks its iptables rules every --iptables-resync
							// seconds, one iptables process per rule: at the default 5 s
							// that was a fifth of an emulated worker's only vCPU at rest.
							// A minute still restores a rule someone flushed.
							Command: []string{"/opt/bin/flanneld", "--ip-masq", "--kube-subnet-mgr", "--iptables-resync=60"},
							Env: []corev1.EnvVar{
								{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
								{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							},
							SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "run", MountPath: "/run/flannel"},
								{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
								{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
							},
						}},
						Volumes: []corev1.Volume{
							hostPath("run", "/run/flannel", corev1.HostPathDirectoryOrCreate),
							hostPath("cni-plugin", "/opt/cni/bin", corev1.HostPathDirectoryOrCreate),
							hostPath("cni", "/etc/cni/net.d", corev1.HostPathDirectoryOrCreate),
							hostPath("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
							{Name: "flannel-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: "kube-flannel-cfg"},
							}}},
						},
					},
				},
			},
		},
	}
	return manifest(objs...)
}
