// Package delete is `knest delete`: it deletes clusters and waits until they and
// everything knest created for them on the host are gone.
package delete

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/knest"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 15 * time.Minute

type flagpole struct {
	IgnoreNotFound bool
	Wait           bool
	Timeout        time.Duration
}

// NewCommand returns the delete command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete clusters",
		Long: "Delete clusters. The knest controller removes every VM, Secret, Service and disk it\n" +
			"created for a cluster before the cluster goes; by default the command waits for that.",
		Example: `  knest delete demo
  knest delete demo other --timeout 30m`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			return c.Delete(cmd.Context(), ns, args,
				knest.DeleteWithWait(timeout), knest.DeleteIgnoreNotFound(flags.IgnoreNotFound))
		},
	}
	cmd.Flags().BoolVar(&flags.IgnoreNotFound, "ignore-not-found", false, "treat a cluster that does not exist as deleted")
	cmdutil.AddWaitFlags(cmd.Flags(), &flags.Wait, &flags.Timeout, DefaultTimeout, "the clusters are gone")
	return cmd
}
