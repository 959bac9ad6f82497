// Package cloudcontroller is `knest cloud-controller-manager`, hidden: the cloud
// controller manager knest's controller runs for each tenant in its host namespace
// (pkg/ccm renders it), serving pkg/cloudprovider.
package cloudcontroller

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/ccm"
	"github.com/knest-dev/knest/pkg/cloudprovider"
)

type flags struct {
	cluster, namespace, tenantKubeconfig, healthAddr string
}

// NewCommand returns the hidden cloud-controller-manager command.
func NewCommand() *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:    "cloud-controller-manager",
		Short:  "Run a tenant's cloud controller manager: its LoadBalancer Services on the host's load balancer (run by knest's controller)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cluster, "cluster", "", "The tenant's Cluster API cluster name")
	fl.StringVar(&f.namespace, "namespace", "", "The tenant's host namespace, where its VMs run and its load balancers are made")
	fl.StringVar(&f.tenantKubeconfig, "tenant-kubeconfig", "", "The tenant's admin kubeconfig")
	fl.StringVar(&f.healthAddr, "health-address", fmt.Sprintf(":%d", ccm.HealthPort), "Address of /healthz and /readyz")
	return cmd
}

func run(cmd *cobra.Command, f *flags) error {
	if f.cluster == "" || f.namespace == "" || f.tenantKubeconfig == "" {
		return errors.New("--cluster, --namespace and --tenant-kubeconfig are required")
	}
	hostCfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("the host's in-cluster config: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	host, err := client.New(hostCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	tenantCfg, err := clientcmd.BuildConfigFromFlags("", f.tenantKubeconfig)
	if err != nil {
		return fmt.Errorf("the tenant's kubeconfig: %w", err)
	}
	tenantCfg.UserAgent = "knest-cloud-controller-manager"
	tenant, err := kubernetes.NewForConfig(tenantCfg)
	if err != nil {
		return err
	}
	p, err := cloudprovider.New(cloudprovider.Options{ClusterName: f.cluster, Namespace: f.namespace, Host: host})
	if err != nil {
		return err
	}

	synced := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-synced:
			_, _ = w.Write([]byte("ok"))
		default:
			http.Error(w, "the tenant's Services and Nodes are not synced yet", http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", f.healthAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	return cloudprovider.Run(cmd.Context(), p, tenant, synced)
}
