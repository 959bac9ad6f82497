package cluster

import (
	corev1 "k8s.io/api/core/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"

	"github.com/knest-dev/knest/pkg/csi/deploy"
)

// DefaultStorageClass is the tenant's StorageClass when spec.providers.storage
// names none: the host's default class, the tenant's default.
const DefaultStorageClass = "knest"

// StorageName is the ClusterResourceSet and ConfigMap carrying the tenant half of
// the CSI driver.
func StorageName(cluster string) string { return cluster + "-csi" }

const storageManifest = "csi.yaml"

// storage renders the tenant's CSI driver (pkg/csi/deploy): its controller on the
// host, and its tenant objects in a ConfigMap that a ClusterResourceSet applies with
// strategy Reconcile, so that a changed class list reaches the tenant.
func (r renderer) storage(g *Graph) error {
	var classes []deploy.StorageClass
	for _, c := range r.nc.Spec.Providers.Storage.Classes {
		classes = append(classes, deploy.StorageClass{Name: c.Name, HostClass: c.HostStorageClassName, Default: c.Default})
	}
	if len(classes) == 0 {
		classes = []deploy.StorageClass{{Name: DefaultStorageClass, Default: true}}
	}
	objs, err := deploy.Render(deploy.Input{
		Cluster: r.name, Namespace: r.ns,
		Images:           r.opts.CSIImages,
		KubeconfigSecret: KubeconfigSecretName(r.name),
		StorageClasses:   classes,
		Labels:           r.meta("", "").Labels,
	})
	if err != nil {
		return err
	}
	tenant, err := manifest(objs.Tenant.List()...)
	if err != nil {
		return err
	}
	g.Storage = objs.Host
	g.StorageConfigMap = &corev1.ConfigMap{
		TypeMeta:   typeMeta(corev1.SchemeGroupVersion.WithKind("ConfigMap")),
		ObjectMeta: r.meta(StorageName(r.name), ""),
		Data:       map[string]string{storageManifest: tenant},
	}
	g.StorageCRS = r.clusterResourceSet(StorageName(r.name), g.StorageConfigMap.Name, addonsv1.ClusterResourceSetStrategyReconcile)
	return nil
}
