// Package restore is `knest restore`: it brings a cluster's etcd back to a snapshot.
package restore

import (
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
)

// DefaultTimeout bounds --wait: the restore, then the control plane's restart.
const DefaultTimeout = 30 * time.Minute

// NewCommand returns the restore command.
func NewCommand(logger logr.Logger, _ genericiooptions.IOStreams) *cobra.Command {
	var from string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restore NAME --from SNAPSHOT",
		Short: "Bring a cluster's etcd back to a snapshot",
		Long: "Bring a cluster's etcd back to one of its snapshots (status.backup.snapshots, or the\n" +
			"name `knest backup` printed). etcd stops (a hosted etcd's pod, or the control-plane VM),\n" +
			"a Job writes the snapshot onto its volume, and it starts again: every object written\n" +
			"after the snapshot is lost. Worker nodes keep running and report again. A VM control\n" +
			"plane is restored with one node: scale it to 1 first.",
		Example:           `  knest restore demo --from 20261127T091500Z.db`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before contacting the cluster.
			if !backup.ValidSnapshotName(from) {
				return errors.New("--from needs a snapshot name, like 20261127T091500Z.db (status.backup.snapshots lists them)")
			}
			t, err := cmdutil.WaitTimeout(wait, timeout)
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
			return c.Restore(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, from, t)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the snapshot to restore, e.g. 20261127T091500Z.db")
	cmdutil.AddWaitFlags(cmd.Flags(), &wait, &timeout, DefaultTimeout, "the cluster is restored and ready")
	return cmd
}
