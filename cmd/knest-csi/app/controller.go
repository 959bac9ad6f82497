package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/controller"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

// DefaultHotplugWait is how long a publish or unpublish call waits for KubeVirt's
// hot-plug: below csi-attacher's own call timeout (--timeout, 15 s by default), so
// that a slow hot-plug answers Unavailable and is asked again rather than timed out.
const DefaultHotplugWait = 10 * time.Second

type controllerFlags struct {
	namespace, cluster string
	kubeconfig         string
	tenantKubeconfig   string
	hotplugWait        time.Duration
	prepImage          string
}

func newControllerCommand(logs io.Writer, o *options) *cobra.Command {
	f := &controllerFlags{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Serve the CSI identity and controller services on the host, for one tenant",
		Long: "Serves the CSI identity and controller services for the tenant cluster --cluster,\n" +
			"whose host namespace is --namespace: volumes are PVCs there, hot-plugged into the\n" +
			"tenant's node VMs. Runs beside csi-provisioner and csi-attacher, which watch the\n" +
			"tenant's API and call it over --endpoint. It talks to the host's API in-cluster\n" +
			"(the pod's service account) unless --kubeconfig is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd.Context(), logs, o, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", "", "The tenant's host namespace, where its volumes (PVCs) and node VMs are (required)")
	fl.StringVar(&f.cluster, "cluster", "", "The tenant's cluster name, as Cluster API's cluster-name label on its VMs (required)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig of the host cluster; empty: in-cluster")
	fl.StringVar(&f.tenantKubeconfig, "tenant-kubeconfig", "", "Kubeconfig of the tenant cluster: given, the controller removes each tenant node's startup taint ("+startuptaint.Taint.Key+") once the node's plugin has registered")
	fl.DurationVar(&f.hotplugWait, "hotplug-wait", DefaultHotplugWait, "How long a publish or unpublish call waits for KubeVirt's hot-plug (or a disk image's preparation) before it answers Unavailable (the attacher calls again)")
	fl.StringVar(&f.prepImage, "prep-image", "", "This driver's own image, which the pods that prepare a Filesystem volume's disk image run with `knest-csi prepare-disk` (required)")
	return cmd
}

func runController(ctx context.Context, logs io.Writer, o *options, f *controllerFlags) error {
	if f.namespace == "" || f.cluster == "" || f.prepImage == "" {
		return errors.New("--namespace, --cluster and --prep-image are required")
	}
	log := o.logger(logs).WithValues("namespace", f.namespace, "cluster", f.cluster)
	ctrl.SetLogger(log)
	cfg, err := hostConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("failed to build the scheme: %w", err)
		}
	}
	// No cache: the driver reads one PVC, pod or VM per call, and its Role grants no
	// list or watch.
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create a client of the host cluster: %w", err)
	}
	c = client.NewNamespacedClient(c, f.namespace)
	vms, err := controller.NewVMs(cfg, c)
	if err != nil {
		return err
	}
	srv, err := controller.New(controller.Config{
		Client: c, VMs: vms, Namespace: f.namespace, ClusterName: f.cluster, HotplugWait: f.hotplugWait, PrepImage: f.prepImage,
	})
	if err != nil {
		return err
	}
	var after []func(context.Context) error
	if f.tenantKubeconfig != "" {
		run, err := startupTaints(f.tenantKubeconfig)
		if err != nil {
			return err
		}
		after = append(after, run)
	}
	return o.serve(ctx, log, []any{&knestcsi.Identity{Version: knestcsi.Version}, srv}, after...)
}

// startupTaints returns what runs package startuptaint's reconciler against the
// tenant at kubeconfig: a manager of its own (one replica, so no leader election;
// no metrics or probes: the driver's /healthz is the pod's), started once the
// tenant's API answers.
func startupTaints(kubeconfig string) (func(context.Context) error, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to load --tenant-kubeconfig %s: %w", kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build the scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, fmt.Errorf("failed to create a manager of the tenant cluster: %w", err)
	}
	if err := (&startuptaint.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := waitForAPI(ctx, cfg, tenantAPIPoll); err != nil {
			return err
		}
		return mgr.Start(ctx)
	}, nil
}

// tenantAPIPoll is how often the controller asks whether the tenant's API answers.
const tenantAPIPoll = 5 * time.Second

// waitForAPI waits until the API server of cfg answers, or ctx is done. The driver's
// pod starts with the tenant's other host objects, before the tenant's API answers
// (a VM control plane boots for minutes): a manager started then gives its caches
// two minutes and ends the process, which would restart the whole pod in a backoff.
func waitForAPI(ctx context.Context, cfg *rest.Config, interval time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a discovery client of the tenant cluster: %w", err)
	}
	log := ctrl.LoggerFrom(ctx)
	waiting := false
	err = wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		_, err := dc.ServerVersion()
		if err != nil && !waiting {
			log.Info("Waiting for the tenant's API server", "error", err.Error())
			waiting = true
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the tenant's API server did not answer: %w", err)
	}
	return nil
}

func hostConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("failed to load --kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to get the in-cluster config of the host (run in a pod, or give --kubeconfig): %w", err)
	}
	return cfg, nil
}
