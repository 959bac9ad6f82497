// Package create is `knest create`: it creates a NestedCluster from flags or a
// manifest, or with --dry-run prints what it would create.
package create

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/printers"
	"github.com/knest-dev/knest/pkg/knest"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 30 * time.Minute

type flagpole struct {
	File string

	Version            string
	ControlPlane       int32
	ControlPlaneMode   string
	ControlPlaneCPU    int32
	ControlPlaneMemory string
	Workers            int32
	WorkerCPU          int32
	WorkerMemory       string
	Pools              []string
	Autoscale          []string
	Image              string
	RootDisk           string
	DiskSize           string
	EtcdStorageClass   string
	EtcdSize           string
	EtcdEphemeral      bool
	NoLoadBalancer     bool
	NoStorage          bool
	StorageClasses     []string
	EtcdMembers        int32

	PodCIDR     string
	ServiceCIDR string
	DNSDomain   string
	CNI         string
	ServiceType string
	APIHost     string
	CertSANs    []string

	DryRun    bool
	Output    string
	ShowGraph bool
	Wait      bool
	Timeout   time.Duration
}

// NewCommand returns the create command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant cluster",
		Long: "Create a tenant cluster (a NestedCluster) from flags, or from a manifest with -f.\n" +
			"Input is checked before anything is sent to the host cluster. By default the\n" +
			"command waits until the cluster is ready; --dry-run prints what it would create.",
		Example: `  # a cluster with one control-plane node and two workers
  knest create demo --workers 2

  # the control plane as pods on the host, only the workers as VMs
  knest create light --control-plane-mode hosted --workers 1

  # three control-plane nodes, a GPU pool that starts empty
  knest create ml --control-plane 3 --workers 2 --pool gpu=0

  # workers the tenant's cluster-autoscaler sizes from 1 to 5 nodes, and a GPU pool
  # it adds nodes to (from none) when pods ask for them
  knest create ml --autoscale 1:5 --autoscale gpu=0:4

  # show the NestedCluster and every Cluster API object it becomes, without a cluster
  knest create demo --dry-run -o yaml --show-graph

  # from a manifest (- reads stdin)
  knest create -f demo.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(cmd, logger, streams, flags, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&flags.File, "filename", "f", "", "create from a NestedCluster manifest (YAML or JSON); - reads stdin")
	fs.StringVar(&flags.Version, "version", "", "tenant Kubernetes version (default "+knestv1.DefaultVersion+")")
	fs.Int32Var(&flags.ControlPlane, "control-plane", 1, "number of control-plane nodes: 1, 3, 5 or 7")
	fs.StringVar(&flags.ControlPlaneMode, "control-plane-mode", "", "where the control plane runs: vm (its own VMs) or hosted (pods on the host; 1 or 3 API servers) (default vm)")
	fs.Int32Var(&flags.ControlPlaneCPU, "control-plane-cpu", 0, "vCPUs per control-plane node, at least 2 (default 2)")
	fs.StringVar(&flags.ControlPlaneMemory, "control-plane-memory", "", "memory per control-plane node, at least 1700Mi (default 4Gi)")
	fs.Int32Var(&flags.Workers, "workers", 1, "number of nodes in the default worker pool \""+knestv1.DefaultPoolName+"\" (0 keeps it empty)")
	fs.Int32Var(&flags.WorkerCPU, "worker-cpu", 0, "vCPUs per worker node (default 2)")
	fs.StringVar(&flags.WorkerMemory, "worker-memory", "", "memory per worker node, at least 1Gi (default 4Gi)")
	fs.StringArrayVar(&flags.Pools, "pool", nil, "add a worker pool NAME=COUNT (repeatable); without --workers, only these pools are created")
	fs.StringArrayVar(&flags.Autoscale, "autoscale", nil, "let the tenant's cluster-autoscaler size a pool between MIN and MAX nodes: POOL=MIN:MAX adds the pool (as --pool does), MIN:MAX alone is the default pool (repeatable)")
	fs.StringVar(&flags.Image, "image", "", "node image (containerDisk) for every node (default the controller's image for the version)")
	fs.StringVar(&flags.RootDisk, "root-disk", "", "root disk of every node: containerdisk (ephemeral) or datavolume (persistent, needs --disk-size) (default containerdisk)")
	fs.StringVar(&flags.DiskSize, "disk-size", "", "size of a datavolume root disk, e.g. 20Gi")
	fs.StringVar(&flags.EtcdStorageClass, "etcd-storage-class", "", "StorageClass of etcd's volume (default the host's default class)")
	fs.StringVar(&flags.EtcdSize, "etcd-size", "", "size of etcd's volume, 1Gi to 64Gi; etcd's quota is 3/4 of it (default 2Gi)")
	fs.Int32Var(&flags.EtcdMembers, "etcd-members", 0, "members of a hosted etcd, each on its own volume: 1 or 3, which keeps the API writable while one is lost (default 1)")
	fs.BoolVar(&flags.EtcdEphemeral, "etcd-ephemeral", false, "keep etcd off any volume: the tenant's objects are lost with the etcd pod or control-plane VM")
	fs.BoolVar(&flags.NoStorage, "no-storage", false, "run no CSI driver for the tenant, for a host without KubeVirt volume hotplug: its volume claims stay Pending (cannot change later)")
	fs.StringArrayVar(&flags.StorageClasses, "storage-class", nil, "a tenant StorageClass NAME=HOSTCLASS whose volumes are claims of the host class HOSTCLASS (NAME alone: the host's default class); the first is the tenant's default (repeatable; default one class \""+cluster.DefaultStorageClass+"\" of the host's default)")
	fs.BoolVar(&flags.NoLoadBalancer, "no-load-balancer", false, "run no cloud controller manager for the tenant, for a host without a load balancer: its LoadBalancer Services get no address")
	fs.StringVar(&flags.PodCIDR, "pod-cidr", "", "tenant pod network, IPv4 /8 to /24 (default "+knestv1.DefaultPodCIDR+")")
	fs.StringVar(&flags.ServiceCIDR, "service-cidr", "", "tenant service network, IPv4 /12 to /24 (default "+knestv1.DefaultServiceCIDR+")")
	fs.StringVar(&flags.DNSDomain, "dns-domain", "", "tenant cluster DNS domain (default "+knestv1.DefaultDNSDomain+")")
	fs.StringVar(&flags.CNI, "cni", "", "network plugin to install: flannel or none (default flannel)")
	fs.StringVar(&flags.ServiceType, "service-type", "", "how the tenant API is exposed on the host: ClusterIP, NodePort or LoadBalancer (default ClusterIP)")
	fs.StringVar(&flags.APIHost, "api-host", "", "fixed host name or IP of the tenant API endpoint (added to the certificate)")
	fs.StringArrayVar(&flags.CertSANs, "cert-san", nil, "extra name or IP in the tenant API server certificate (repeatable)")
	fs.BoolVar(&flags.DryRun, "dry-run", false, "print the cluster instead of creating it; needs no host cluster")
	fs.StringVarP(&flags.Output, "output", "o", "", "with --dry-run: yaml or json (default yaml)")
	fs.BoolVar(&flags.ShowGraph, "show-graph", false, "with --dry-run: also print every Cluster API object the controller would create")
	cmdutil.AddWaitFlags(fs, &flags.Wait, &flags.Timeout, DefaultTimeout, "the cluster is ready")
	return cmd
}

func runE(cmd *cobra.Command, logger logr.Logger, streams genericiooptions.IOStreams, flags *flagpole, args []string) error {
	nc, err := clusterFromInput(cmd, streams, flags, args)
	if err != nil {
		return err
	}
	if flags.DryRun {
		var opts []knest.ObjectsOption
		if flags.ShowGraph {
			opts = append(opts, knest.ObjectsWithGraph(cluster.Options{}))
		}
		objs, err := knest.Objects(nc, opts...)
		if err != nil {
			return err
		}
		format := flags.Output
		if format == "" {
			format = printers.YAML
		}
		return printers.Objects(streams.Out, format, objs, false, knest.Scheme())
	}

	timeout, err := cmdutil.WaitTimeout(flags.Wait, flags.Timeout)
	if err != nil {
		return err
	}
	c, err := cmdutil.NewClient(cmd, logger)
	if err != nil {
		return err
	}
	if err := c.Create(cmd.Context(), nc, knest.CreateWithWait(timeout)); err != nil {
		return err
	}
	if timeout > 0 {
		logger.Info(fmt.Sprintf("\nGet its kubeconfig with:\n  knest kubeconfig %s -n %s --output-file %s.kubeconfig", nc.Name, nc.Namespace, nc.Name))
	} else {
		logger.Info(fmt.Sprintf("\nFollow it with:\n  knest get %s -n %s", nc.Name, nc.Namespace))
	}
	return nil
}
