// Package backup is `knest backup`: it takes a snapshot of a cluster's etcd now.
package backup

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
)

// DefaultTimeout bounds the wait for the snapshot.
const DefaultTimeout = 10 * time.Minute

// NewCommand returns the backup command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "backup NAME",
		Short: "Take a snapshot of a cluster's etcd now",
		Long: "Take a snapshot of a cluster's etcd now, beside the scheduled ones (spec.backup), on\n" +
			"the cluster's backup volume in its host namespace, and print its name: what\n" +
			"`knest restore NAME --from SNAPSHOT` takes. status.backup lists the snapshots kept.",
		Example: `  knest backup demo
  kubectl get nestedcluster demo -o jsonpath='{.status.backup.snapshots}'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return errors.New("--timeout must be positive")
			}
			ns, _, err := cmdutil.Namespace(cmd)
			if err != nil {
				return err
			}
			c, err := cmdutil.NewClient(cmd, logger)
			if err != nil {
				return err
			}
			snap, err := c.Backup(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, timeout)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(streams.Out, snap.Name)
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", DefaultTimeout, "how long to wait for the snapshot")
	return cmd
}
