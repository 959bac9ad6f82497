// Package placement says where on the host cluster a tenant's pieces go.
package placement

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpreadAcrossHosts prefers putting the pods that match labels (a pool's VMs, a hosted
// control plane's API servers or etcd members) on different host nodes, so the loss
// or drain of one host node takes out as few of them as possible. Preferred, not
// required: a host with fewer nodes than replicas must still place them all, and a
// rollout's surge pod must still find a node. The selector has its own copy of labels,
// which callers also give the pods.
func SpreadAcrossHosts(labels map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}
