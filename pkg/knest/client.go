// Package knest is the library behind the knest CLI: it creates, scales, upgrades,
// waits for, lists, describes and deletes NestedClusters on a host cluster and reads
// their kubeconfigs. The cobra commands in pkg/cmd/knest turn flags into calls of this
// package with functional options (the shape of kind's pkg/cluster).
package knest

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Scheme returns a scheme with every type knest reads, writes or prints: Kubernetes'
// built-in types, knest's (the HostedControlPlane too), and the Cluster API and CAPK types a NestedCluster renders to.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(knestv1.AddToScheme(s))
	utilruntime.Must(hcpv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	utilruntime.Must(addonsv1.AddToScheme(s))
	utilruntime.Must(capkv1.AddToScheme(s))
	return s
}

// Client drives NestedClusters on one host cluster.
type Client struct {
	c            client.WithWatch
	logger       logr.Logger
	pollInterval time.Duration
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithLogger sets where progress and debug lines go (default: discarded).
func WithLogger(logger logr.Logger) ClientOption {
	return func(c *Client) { c.logger = logger }
}

// WithPollInterval sets how often waits re-read a NestedCluster in addition to
// watching it (default 10s). Tests shorten it.
func WithPollInterval(d time.Duration) ClientOption {
	return func(c *Client) { c.pollInterval = d }
}

// NewClient returns a Client using c, whose scheme must include knest's types (see
// Scheme).
func NewClient(c client.WithWatch, opts ...ClientOption) *Client {
	kc := &Client{c: c, logger: logr.Discard(), pollInterval: 10 * time.Second}
	for _, o := range opts {
		o(kc)
	}
	return kc
}

// NewClientForConfig returns a Client talking to the host cluster at cfg.
func NewClientForConfig(cfg *rest.Config, opts ...ClientOption) (*Client, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the host cluster %s: %w", cfg.Host, err)
	}
	return NewClient(c, opts...), nil
}

// Kube returns the underlying Kubernetes client.
func (c *Client) Kube() client.WithWatch { return c.c }
