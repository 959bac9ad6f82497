// Package upgrade is `knest upgrade`: it moves a cluster to a newer Kubernetes
// version, optionally holding some worker pools at the version they run.
package upgrade

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/printers"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/upgrade"
)

// DefaultTimeout bounds --wait: Cluster API replaces every machine, one at a time.
const DefaultTimeout = 60 * time.Minute

type flagpole struct {
	Version      string
	HoldPools    []string
	ReleasePools []string
	Wait         bool
	Timeout      time.Duration
}

// NewCommand returns the upgrade command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "upgrade NAME --version VERSION",
		Short: "Upgrade a cluster's Kubernetes version",
		Long: "Upgrade a cluster to a newer Kubernetes version, one minor at a time (kubeadm's rule;\n" +
			"downgrades are refused). Cluster API replaces the control-plane machines, then each\n" +
			"pool's, one by one; with --wait every machine is reported as it is added, becomes\n" +
			"ready and is removed, and the command ends with the kubelet version each node runs.\n\n" +
			"--hold-pool keeps a pool at the version it runs now (at most 3 minors behind the\n" +
			"control plane); a pool held before stays held until --release-pool lets it follow\n" +
			"the cluster's version again (give the version the cluster has to release only).",
		Example: `  # the control plane and every pool to v1.35.4
  knest upgrade demo --version v1.35.4

  # the control plane and the default pool, the gpu pool stays at the version it runs
  knest upgrade demo --version v1.35.4 --hold-pool gpu

  # later: let the gpu pool catch up
  knest upgrade demo --version v1.35.4 --release-pool gpu`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(cmd, logger, streams, flags, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&flags.Version, "version", "", "Kubernetes version to upgrade to, e.g. "+knestv1.DefaultVersion+" (the v is optional)")
	fs.StringArrayVar(&flags.HoldPools, "hold-pool", nil, "keep this worker pool at the version it runs now (repeatable)")
	fs.StringArrayVar(&flags.ReleasePools, "release-pool", nil, "let this held worker pool follow the cluster's version again (repeatable)")
	cmdutil.AddWaitFlags(fs, &flags.Wait, &flags.Timeout, DefaultTimeout, "every machine runs its new version and the cluster is ready")
	return cmd
}

// request turns the flags into an upgrade request and checks what needs no cluster.
func request(flags *flagpole) (upgrade.Request, error) {
	if flags.Version == "" {
		return upgrade.Request{}, errors.New("--version is required: the Kubernetes version to upgrade to, e.g. " + knestv1.DefaultVersion)
	}
	req := upgrade.Request{
		Version:      upgrade.NormalizeVersion(flags.Version),
		HoldPools:    flags.HoldPools,
		ReleasePools: flags.ReleasePools,
	}
	if err := upgrade.CheckVersion(req.Version); err != nil {
		return req, fmt.Errorf("--version %s: %w", flags.Version, err)
	}
	return req, req.Validate()
}

func runE(cmd *cobra.Command, logger logr.Logger, streams genericiooptions.IOStreams, flags *flagpole, name string) error {
	req, err := request(flags)
	if err != nil {
		return err
	}
	timeout, err := cmdutil.WaitTimeout(flags.Wait, flags.Timeout)
	if err != nil {
		return err
	}
	ns, _, err := cmdutil.Namespace(cmd)
	if err != nil {
		return err
	}
	c, err := cmdutil.NewClient(cmd, logger)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	if _, err := c.Upgrade(cmd.Context(), key, req, knest.UpgradeWithWait(timeout)); err != nil {
		return err
	}
	if timeout <= 0 {
		logger.Info(fmt.Sprintf("\nFollow it with:\n  knest get %s -n %s", name, ns))
		return nil
	}
	machines, err := c.NodeVersions(cmd.Context(), key)
	if err != nil {
		return fmt.Errorf("cluster %s is upgraded, but listing the versions its nodes run failed: %w", name, err)
	}
	return printers.NodeVersions(streams.Out, machines)
}
