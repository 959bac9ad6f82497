// Package etcd is `knest etcd`, hidden: what knest's backup and restore Jobs run
// in the knest image (pkg/backup renders them).
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
)

// NewCommand returns the hidden etcd command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "etcd",
		Short:  "Snapshot and restore a tenant's etcd, replace a member (run by knest's Jobs)",
		Hidden: true,
	}
	cmd.AddCommand(newSnapshot(), newRestore(), newReplaceMember())
	return cmd
}

// terminationLog is where a Job's pod leaves its result for the controller.
const terminationLog = "/dev/termination-log"

func newSnapshot() *cobra.Command {
	var endpoint, certs, dir string
	var keep int
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take a snapshot into --dir and keep the newest --keep",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keep < 1 {
				return errors.New("--keep must be 1 or more")
			}
			tlsConfig, err := clientTLS(certs)
			if err != nil {
				return err
			}
			var r backup.Result
			if err := withRetries(cmd, func(ctx context.Context) (err error) {
				r, err = backup.Save(ctx, zap.NewNop(), []string{endpoint}, tlsConfig, dir, time.Now())
				return err
			}); err != nil {
				return err
			}
			if r.Snapshots, err = backup.Prune(dir, keep); err != nil {
				return fmt.Errorf("took %s, but failed to remove old snapshots: %w", r.Name, err)
			}
			// With a fresh snapshot in hand, the moment to give free pages back; a
			// failure there does not undo the snapshot.
			ctx, cancel := context.WithTimeout(cmd.Context(), tryTimeout)
			defer cancel()
			if r.Defragmented, err = backup.Defragment(ctx, zap.NewNop(), []string{endpoint}, tlsConfig); err != nil {
				r.DefragError = err.Error()
			}
			msg := r.Message()
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			// Outside a pod there is no termination log; the line above is the result.
			if err := os.WriteFile(terminationLog, []byte(msg), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "etcd client URL")
	cmd.Flags().StringVar(&certs, "certs", "", "directory with ca.crt, tls.crt and tls.key")
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the snapshots")
	cmd.Flags().IntVar(&keep, "keep", knestv1.DefaultBackupKeep, "snapshots to keep")
	for _, f := range []string{"endpoint", "certs", "dir"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func newRestore() *cobra.Command {
	var snapshot, dataDir, diskImage, initialCluster string
	var m backup.Member
	owner := -1
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Make an etcd member's data directory from a snapshot, optionally as a VM's etcd disk image",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !backup.ValidSnapshotName(filepath.Base(snapshot)) {
				return fmt.Errorf("--snapshot %s is not a knest snapshot", snapshot)
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return err
			}
			if err := backup.Restore(zap.NewNop(), snapshot, dataDir, m, initialCluster); err != nil {
				return err
			}
			if owner >= 0 {
				if err := backup.GiveMember(dataDir, owner, owner); err != nil {
					return err
				}
			}
			if diskImage != "" {
				if err := backup.WriteDiskImage(dataDir, diskImage); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s as member %s\n", filepath.Base(snapshot), m.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "snapshot file")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "etcd data directory to restore into (its member directory is replaced)")
	cmd.Flags().StringVar(&diskImage, "disk-image", "", "a VM's etcd disk image to replace with the restored data, for its knest-etcd-disk script")
	cmd.Flags().StringVar(&m.Name, "name", "", "member name")
	cmd.Flags().StringVar(&m.PeerURL, "peer-url", "", "member peer URL")
	cmd.Flags().StringVar(&initialCluster, "initial-cluster", "", "every member, as etcd's --initial-cluster (default the member alone)")
	cmd.Flags().IntVar(&owner, "owner", -1, "user and group id to give the restored member directory (a hosted etcd's user); -1 leaves it root's")
	for _, f := range []string{"snapshot", "data-dir", "name", "peer-url"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func newReplaceMember() *cobra.Command {
	var endpoint, certs, peerURL string
	cmd := &cobra.Command{
		Use:   "replace-member",
		Short: "Remove the member of --peer-url and add it again, to join anew on an empty volume",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsConfig, err := clientTLS(certs)
			if err != nil {
				return err
			}
			var msg string
			if err := withRetries(cmd, func(ctx context.Context) (err error) {
				msg, err = backup.ReplaceMember(ctx, zap.NewNop(), []string{endpoint}, tlsConfig, peerURL)
				return err
			}); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "etcd client URL")
	cmd.Flags().StringVar(&certs, "certs", "", "directory with ca.crt, tls.crt and tls.key")
	cmd.Flags().StringVar(&peerURL, "peer-url", "", "peer URL of the member to replace")
	for _, f := range []string{"endpoint", "certs", "peer-url"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// Each try is bounded, and a new try dials anew: a new pod's first packets can be
// dropped while the host's NetworkPolicy enforcer learns its address (kube-router
// here), a connection that never came up is not waited on for ever, and etcd
// refuses a new member until its peers have been connected for a few seconds.
const (
	tries      = 5
	tryTimeout = time.Minute
	tryPause   = 5 * time.Second
)

func withRetries(cmd *cobra.Command, try func(ctx context.Context) error) error {
	var err error
	for i := range tries {
		if i > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "try %d of %d failed: %v\n", i, tries, err)
			time.Sleep(tryPause)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), tryTimeout)
		err = try(ctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// clientTLS reads the client certificate Secret's files.
func clientTLS(dir string) (*tls.Config, error) {
	var pem [3][]byte
	for i, k := range []string{backup.CACertKey, backup.ClientCertKey, backup.ClientKeyKey} {
		b, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil {
			return nil, err
		}
		pem[i] = b
	}
	return backup.ClientTLS(pem[0], pem[1], pem[2])
}
