package knest

import (
	"context"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeconfigKey is the key of Cluster API's kubeconfig Secret that holds the file.
const KubeconfigKey = "value"

type kubeconfigOptions struct {
	server string
}

// KubeconfigOption configures Kubeconfig.
type KubeconfigOption func(*kubeconfigOptions)

// KubeconfigWithServer replaces the server URL, for people who reach the tenant API
// another way than the endpoint knest reports (a port-forward, a proxy, a NodePort on
// another address). See RewriteServer.
func KubeconfigWithServer(server string) KubeconfigOption {
	return func(o *kubeconfigOptions) { o.server = server }
}

// Kubeconfig returns the tenant admin kubeconfig of a NestedCluster, read from the
// Secret its status names.
func (c *Client) Kubeconfig(ctx context.Context, key client.ObjectKey, opts ...KubeconfigOption) ([]byte, error) {
	var o kubeconfigOptions
	for _, opt := range opts {
		opt(&o)
	}
	nc, err := c.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	name := nc.Status.KubeconfigSecretName
	if name == "" {
		phase := nc.Status.Phase
		if phase == "" {
			phase = "unknown"
		}
		return nil, fmt.Errorf("cluster %s has no kubeconfig yet (phase %s): it appears in status.kubeconfigSecretName once the control plane is initialized", key.Name, phase)
	}
	secret := &corev1.Secret{}
	if err := c.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("failed to read the kubeconfig of cluster %s from Secret %s: %w", key.Name, name, err)
	}
	data, ok := secret.Data[KubeconfigKey]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("secret %s of cluster %s has no %q key with a kubeconfig", name, key.Name, KubeconfigKey)
	}
	if o.server == "" {
		return data, nil
	}
	out, err := RewriteServer(data, o.server)
	if err != nil {
		return nil, fmt.Errorf("failed to set the server of the kubeconfig of cluster %s: %w", key.Name, err)
	}
	return out, nil
}

// RewriteServer points every cluster of a kubeconfig at server. So that TLS still
// verifies the tenant API server's certificate (whose SANs name the original endpoint),
// it sets tls-server-name to the original endpoint's host (a DNS name or an IP; Go
// checks either against the certificate) unless one is set already or the host stays.
func RewriteServer(kubeconfig []byte, server string) ([]byte, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("server %q must be a URL like https://HOST:PORT", server)
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the kubeconfig: %w", err)
	}
	if len(cfg.Clusters) == 0 {
		return nil, fmt.Errorf("the kubeconfig has no clusters")
	}
	for name, cl := range cfg.Clusters {
		if cl.TLSServerName == "" && cl.Server != "" {
			orig, err := url.Parse(cl.Server)
			if err != nil {
				return nil, fmt.Errorf("cluster %s of the kubeconfig has an invalid server %q: %w", name, cl.Server, err)
			}
			if host := orig.Hostname(); host != u.Hostname() {
				cl.TLSServerName = host
			}
		}
		cl.Server = server
	}
	return clientcmd.Write(*cfg)
}
