// Package controller is `knest controller`: it runs the NestedCluster controller
// against the host cluster.
package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/pkg/autoscaler"
	"github.com/knest-dev/knest/pkg/cluster"
)

type flags struct {
	manager.Options
	qps       float32
	burst     int
	logFormat string
	guestDNS  string
}

// NewCommand returns the controller command. It reads the host cluster's
// kubeconfig from the global --kubeconfig/--context flags, or runs in-cluster.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the NestedCluster controller against the host cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runE(cmd, logger, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Render.NodeImageRepository, "node-image-repository", knestv1.DefaultNodeImageRepository, "Repository of node images for pools that name none; the tag is the Kubernetes version")
	fl.StringVar(&f.Render.NodeKernelRepository, "node-kernel-repository", knestv1.DefaultNodeKernelRepository,
		"Repository of the kernel-boot images that go with the node images (knest's node disk has no bootloader); "+cluster.NoKernelBoot+" if your node images boot by themselves")
	fl.StringVar(&f.Render.BootstrapCheck, "bootstrap-check", cluster.BootstrapCheckSSH, "CAPK bootstrap check: ssh (CAPK logs into the VM to confirm kubeadm finished) or none")
	fl.IntVar(&f.Render.CPUAllocationRatio, "cpu-allocation-ratio", 1,
		"Host CPU overcommit of tenant VMs, as KubeVirt's cpuAllocationRatio: each vCPU requests 1/N of a host core (1: whole cores); changing it rolls every tenant's machines")
	fl.DurationVar(&f.Render.NodeStartupTimeout, "node-startup-timeout", cluster.DefaultNodeStartupTimeout,
		"How long a tenant machine may go without joining before its health check replaces it (default: 20m times --host-slowdown)")
	fl.IntVar(&f.Render.HostSlowdown, "host-slowdown", 1,
		"How many times slower than hardware speed this host runs tenant VMs (about 3 under software emulation): kubeadm's timeouts, the kubelet's runtime call deadline and housekeeping interval and the default --node-startup-timeout are multiplied by it; changing it rolls every tenant's machines")
	fl.StringVar(&f.Render.AutoscalerImage, "autoscaler-image", autoscaler.DefaultImage,
		"Image of the tenants' cluster-autoscalers (the upstream one with its clusterapi provider), run for tenants with an autoscaled pool")
	fl.IntVar(&f.Concurrency, "concurrency", 10, "NestedClusters reconciled in parallel")
	fl.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8443", "Address of the HTTPS metrics endpoint (callers need RBAC get on /metrics); 0 disables it")
	fl.StringVar(&f.HealthAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them")
	// client-go's default (5 QPS, burst 10) makes creating 100 clusters take about a
	// minute; see docs/benchmark.md for the figures behind these defaults.
	fl.Float32Var(&f.qps, "kube-api-qps", 50, "Queries per second to the host API server")
	fl.IntVar(&f.burst, "kube-api-burst", 100, "Burst of queries to the host API server")
	fl.BoolVar(&f.LeaderElection, "leader-elect", false, "Elect a leader so several replicas can run with one active")
	fl.StringVar(&f.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's namespace)")
	fl.StringVar(&f.ToolImage, "tool-image", "",
		"The knest image that etcd backup and restore Jobs run (default: the image of the controller's own pod, found through POD_NAMESPACE and POD_NAME)")
	fl.StringVar(&f.guestDNS, "guest-dns-service", "",
		"namespace/name of the Service of the tenant VMs' resolver (config/guestdns), which answers no name of the host's cluster; empty: VMs use the host's cluster DNS, and tenants can look up the host's Services")
	fl.StringVar(&f.logFormat, "log-format", "text", "Log format: text (knest's lines) or json (one object per line, for log collectors)")
	return cmd
}

func runE(cmd *cobra.Command, logger logr.Logger, f *flags) error {
	if f.Render.BootstrapCheck != cluster.BootstrapCheckSSH && f.Render.BootstrapCheck != cluster.BootstrapCheckNone {
		return fmt.Errorf("--bootstrap-check must be ssh or none, not %q", f.Render.BootstrapCheck)
	}
	if f.Render.CPUAllocationRatio < 1 {
		return fmt.Errorf("--cpu-allocation-ratio must be 1 or more, not %d", f.Render.CPUAllocationRatio)
	}
	if f.Render.HostSlowdown < 1 || f.Render.HostSlowdown > 10 {
		return fmt.Errorf("--host-slowdown must be 1 to 10, not %d", f.Render.HostSlowdown)
	}
	if !cmd.Flags().Changed("node-startup-timeout") {
		f.Render.NodeStartupTimeout = 0 // cluster.Options' default, which follows --host-slowdown
	} else if f.Render.NodeStartupTimeout < time.Minute {
		return fmt.Errorf("--node-startup-timeout must be a minute or more, not %s", f.Render.NodeStartupTimeout)
	}
	if f.guestDNS != "" {
		ns, name, ok := strings.Cut(f.guestDNS, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--guest-dns-service must be namespace/name, not %q", f.guestDNS)
		}
		f.GuestDNSService = client.ObjectKey{Namespace: ns, Name: name}
	}
	logger, err := newLogger(f.logFormat, logger, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	cfg, err := restConfig(cmd)
	if err != nil {
		return fmt.Errorf("failed to load the host cluster's kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	if f.ToolImage == "" {
		if f.ToolImage, err = ownImage(cmd.Context(), cfg); err != nil {
			return err
		}
	}
	ctrl.SetLogger(logger)
	// client-go (leader election, reflectors) logs through klog: the same sink.
	klog.SetLogger(logger)
	mgr, err := manager.New(cfg, f.Options)
	if err != nil {
		return err
	}
	logger.Info("Starting the NestedCluster controller", "host", cfg.Host)
	// The command's context ends on SIGINT/SIGTERM (app.Run); the manager then
	// releases its leader lease and returns.
	return mgr.Start(cmd.Context())
}

// ownImage is the image of the pod the controller runs in: the knest image, whose
// `knest etcd` commands backup Jobs run, without a second place to name it.
func ownImage(ctx context.Context, cfg *rest.Config) (string, error) {
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || name == "" {
		return "", errors.New("--tool-image is needed outside a pod (POD_NAMESPACE and POD_NAME are not set): the knest image that etcd backup Jobs run")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to read the controller's own pod for its image (or set --tool-image): %w", err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == containerName {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container %q to take the knest image from: set --tool-image", ns, name, containerName)
}

// containerName is the controller's container in config/manager.
const containerName = "controller"

// newLogger returns the controller's logger for format: the CLI's own for text,
// controller-runtime's zap encoder for json.
func newLogger(format string, text logr.Logger, w io.Writer) (logr.Logger, error) {
	switch format {
	case "text":
		return text, nil
	case "json":
		return zap.New(zap.WriteTo(w), zap.JSONEncoder()), nil
	}
	return logr.Logger{}, fmt.Errorf("--log-format %q: use text or json", format)
}

// restConfig honours the root command's kubectl-style flags when present.
func restConfig(cmd *cobra.Command) (*rest.Config, error) {
	cf := genericclioptions.NewConfigFlags(false)
	if fl := cmd.Flags().Lookup("kubeconfig"); fl != nil && fl.Value.String() != "" {
		v := fl.Value.String()
		cf.KubeConfig = &v
	}
	if fl := cmd.Flags().Lookup("context"); fl != nil && fl.Value.String() != "" {
		v := fl.Value.String()
		cf.Context = &v
	}
	return cf.ToRESTConfig()
}
