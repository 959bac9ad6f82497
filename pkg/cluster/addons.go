package cluster

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Add-ons are objects of the tenant cluster, not the host: a ConfigMap on the host
// carries their manifest and a ClusterResourceSet applies it (the CNI here, the CSI
// driver's tenant half in storage.go).

// cni renders spec.network.cni: flannel (flannel.go), applied once, or nothing.
func (r renderer) cni(g *Graph) error {
	if r.nc.Spec.Network.CNI != knestv1.CNIFlannel {
		return nil
	}
	cm, err := r.flannelConfigMap()
	if err != nil {
		return fmt.Errorf("failed to render the flannel CNI manifest: %w", err)
	}
	g.CNIConfigMap = cm
	g.CNI = r.clusterResourceSet(CNIName(r.name), cm.Name, addonsv1.ClusterResourceSetStrategyApplyOnce)
	return nil
}

// clusterResourceSet applies a ConfigMap's objects to this cluster's tenant.
func (r renderer) clusterResourceSet(name, configMap string, strategy addonsv1.ClusterResourceSetStrategy) *addonsv1.ClusterResourceSet {
	return &addonsv1.ClusterResourceSet{
		TypeMeta:   typeMeta(addonsv1.GroupVersion.WithKind("ClusterResourceSet")),
		ObjectMeta: r.meta(name, ""),
		Spec: addonsv1.ClusterResourceSetSpec{
			// Select this cluster only: tenants' settings (pod CIDR, classes) differ.
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{knestv1.ClusterNameLabel: r.name}},
			Resources:       []addonsv1.ResourceRef{{Kind: "ConfigMap", Name: configMap}},
			Strategy:        string(strategy),
		},
	}
}

// manifest encodes objects as one multi-document YAML, as a ClusterResourceSet's
// ConfigMap carries them.
func manifest[T any](objs ...T) (string, error) {
	var out []byte
	for _, o := range objs {
		doc, err := yaml.Marshal(o)
		if err != nil {
			return "", fmt.Errorf("failed to encode %T: %w", o, err)
		}
		out = append(append(out, "---\n"...), doc...)
	}
	return string(out), nil
}
