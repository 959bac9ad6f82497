package app

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/mount-utils"
	"k8s.io/utils/exec"
	ctrl "sigs.k8s.io/controller-runtime"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
	"github.com/knest-dev/knest/pkg/csi/node"
	"github.com/knest-dev/knest/pkg/csi/registration"
)

type nodeFlags struct {
	nodeID          string
	registrationDir string
	kubeletEndpoint string
	diskDir         string
}

func newNodeCommand(logs io.Writer, o *options) *cobra.Command {
	f := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Serve the CSI identity and node services on a tenant node, and register them with kubelet",
		Long: "Serves the CSI identity and node services on --endpoint, which is kubelet's\n" +
			"--kubelet-endpoint on the node, and registers the driver with kubelet through a\n" +
			"socket in kubelet's plugin registry (--registration-dir), as node-driver-registrar\n" +
			"does for other drivers. Exits non-zero when kubelet reports a failed registration.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNode(cmd.Context(), logs, o, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeID, "node-id", "", "This node's name, which is its VM's name on the host (required; the downward API's spec.nodeName)")
	fl.StringVar(&f.registrationDir, "registration-dir", registration.RegistryDir, "Kubelet's plugin registry directory, where the registration socket goes")
	fl.StringVar(&f.kubeletEndpoint, "kubelet-endpoint", registration.Endpoint(), "The CSI socket (--endpoint) as kubelet sees it on the node")
	fl.StringVar(&f.diskDir, "disk-dir", node.DefaultDiskDir, "Where udev names disks by their serial")
	return cmd
}

func runNode(ctx context.Context, logs io.Writer, o *options, f *nodeFlags) error {
	if f.nodeID == "" {
		return errors.New("--node-id is required")
	}
	log := o.logger(logs).WithValues("node", f.nodeID)
	ctrl.SetLogger(log)
	srv, err := node.New(node.Config{
		NodeID:  f.nodeID,
		DiskDir: f.diskDir,
		Mounter: mount.NewSafeFormatAndMount(mount.New(""), exec.New()),
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.registrationDir, 0o750); err != nil {
		return err
	}
	reg := registration.New(f.kubeletEndpoint)
	return o.serve(ctx, log, []any{&knestcsi.Identity{Version: knestcsi.Version}, srv}, func(ctx context.Context) error {
		return reg.Run(ctx, registration.SocketPath(f.registrationDir))
	})
}
