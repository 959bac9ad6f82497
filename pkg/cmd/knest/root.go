// Package knest is the root `knest` command.
package knest

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/knest-dev/knest/pkg/cmd/knest/backup"
	"github.com/knest-dev/knest/pkg/cmd/knest/cloudcontroller"
	"github.com/knest-dev/knest/pkg/cmd/knest/controller"
	"github.com/knest-dev/knest/pkg/cmd/knest/create"
	"github.com/knest-dev/knest/pkg/cmd/knest/delete"
	"github.com/knest-dev/knest/pkg/cmd/knest/etcd"
	"github.com/knest-dev/knest/pkg/cmd/knest/get"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/cmd/knest/kubeconfig"
	"github.com/knest-dev/knest/pkg/cmd/knest/list"
	"github.com/knest-dev/knest/pkg/cmd/knest/restore"
	"github.com/knest-dev/knest/pkg/cmd/knest/scale"
	"github.com/knest-dev/knest/pkg/cmd/knest/upgrade"
	"github.com/knest-dev/knest/pkg/cmd/knest/version"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

type flagpole struct {
	Verbosity int
	Quiet     bool
}

// NewCommand returns the root knest command with every subcommand.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "knest",
		Short: "knest runs tenant Kubernetes clusters whose nodes are KubeVirt VMs",
		Long: "knest creates, scales, upgrades and deletes tenant Kubernetes clusters\n" +
			"(NestedClusters) whose nodes are KubeVirt VMs on a host cluster, and hands out\n" +
			"their kubeconfigs.\n" +
			"It talks to the host cluster through your kubeconfig, like kubectl.",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return runE(logger, streams, flags)
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version(),
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
	})
	cmd.PersistentFlags().IntVarP(&flags.Verbosity, "verbosity", "v", 0, "log verbosity: 1 adds debug lines and error details")
	cmd.PersistentFlags().BoolVarP(&flags.Quiet, "quiet", "q", false, "print no progress or errors on stderr (data still goes to stdout)")
	cmdutil.AddKubeFlags(cmd.PersistentFlags())

	cmd.AddCommand(create.NewCommand(logger, streams))
	cmd.AddCommand(scale.NewCommand(logger, streams))
	cmd.AddCommand(upgrade.NewCommand(logger, streams))
	cmd.AddCommand(delete.NewCommand(logger, streams))
	cmd.AddCommand(list.NewCommand(logger, streams))
	cmd.AddCommand(get.NewCommand(logger, streams))
	cmd.AddCommand(kubeconfig.NewCommand(logger, streams))
	cmd.AddCommand(backup.NewCommand(logger, streams))
	cmd.AddCommand(restore.NewCommand(logger, streams))
	cmd.AddCommand(version.NewCommand(logger, streams))
	cmd.AddCommand(controller.NewCommand(logger, streams))
	cmd.AddCommand(etcd.NewCommand())
	cmd.AddCommand(cloudcontroller.NewCommand())
	// cobra adds its `completion` command (bash, zsh, fish, powershell) on Execute.
	return cmd
}

func runE(logger logr.Logger, _ genericiooptions.IOStreams, flags *flagpole) error {
	l := cli.FromLogr(logger)
	if l == nil {
		return nil
	}
	if flags.Quiet {
		// app.Run handles -q before parsing too; this covers NewCommand used directly.
		l.SetWriter(io.Discard)
		l.SetVerbosity(-1)
		return nil
	}
	l.SetVerbosity(flags.Verbosity)
	return nil
}
