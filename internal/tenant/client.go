package tenant

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Clientset is a client of the tenant API of cluster (a NestedCluster's, or Cluster
// API's Cluster's, namespace and name), made from Cluster API's admin kubeconfig
// Secret of the cluster, read with r. Each request is bounded by timeout.
func Clientset(ctx context.Context, r client.Reader, cluster client.ObjectKey, timeout time.Duration) (kubernetes.Interface, error) {
	s, err := kubeconfigSecret(ctx, r, cluster)
	if err != nil {
		return nil, err
	}
	return clientsetFrom(s, timeout)
}

func kubeconfigSecret(ctx context.Context, r client.Reader, cluster client.ObjectKey) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: secret.Name(cluster.Name, secret.Kubeconfig)}
	if err := r.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("failed to read the kubeconfig Secret: %w", err)
	}
	return s, nil
}

func clientsetFrom(s *corev1.Secret, timeout time.Duration) (kubernetes.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
	if err != nil {
		return nil, fmt.Errorf("failed to read the kubeconfig Secret: %w", err)
	}
	cfg.Timeout = timeout
	return kubernetes.NewForConfig(cfg)
}
