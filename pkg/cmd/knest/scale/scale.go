// Package scale is `knest scale`: it resizes the control plane and worker pools of a
// cluster, optionally choosing which nodes go.
package scale

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/scale"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 20 * time.Minute

type flagpole struct {
	ControlPlane int32
	Workers      int32
	Pools        []string
	RemoveNodes  []string
	Autoscale    []string
	Wait         bool
	Timeout      time.Duration
}

// NewCommand returns the scale command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "scale NAME",
		Short: "Resize a cluster's control plane or worker pools",
		Long: "Resize a cluster's control plane (1, 3, 5 or 7 nodes) or worker pools (0 to 200 nodes).\n" +
			"On scale-down Cluster API drains each node before its VM goes; --remove-node picks\n" +
			"which nodes of a shrinking pool go (otherwise Cluster API picks).\n" +
			"--autoscale hands a pool to the tenant's cluster-autoscaler, which sizes it between\n" +
			"MIN and MAX; such a pool takes no size of its own until --autoscale POOL=off, which\n" +
			"keeps the size the autoscaler last set (or the one --pool gives).",
		Example: `  # two more workers in the default pool
  knest scale demo --workers 4

  # an HA control plane, and the GPU pool down to zero
  knest scale demo --control-plane 3 --pool gpu=0

  # shrink the default pool by one and remove exactly this node
  knest scale demo --workers 2 --remove-node demo-workers-7xk2p-9wq4d

  # let the autoscaler size the GPU pool from 0 to 4 nodes, later from 1 to 8
  knest scale demo --autoscale gpu=0:4
  knest scale demo --autoscale gpu=1:8

  # autoscaling off: the pool keeps its current size, or gets the one given
  knest scale demo --autoscale gpu=off --pool gpu=2`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(cmd, logger, flags, args[0])
		},
	}
	fs := cmd.Flags()
	fs.Int32Var(&flags.ControlPlane, "control-plane", 0, "new number of control-plane nodes: 1, 3, 5 or 7")
	fs.Int32Var(&flags.Workers, "workers", 0, "new size of the default pool (the pool named workers, or the only pool)")
	fs.StringArrayVar(&flags.Pools, "pool", nil, "new size of a pool, NAME=COUNT (repeatable)")
	fs.StringArrayVar(&flags.RemoveNodes, "remove-node", nil, "node to remove from a pool that shrinks (repeatable)")
	fs.StringArrayVar(&flags.Autoscale, "autoscale", nil, "autoscale a pool between MIN and MAX nodes, POOL=MIN:MAX (MIN:MAX alone: the default pool), or POOL=off (repeatable)")
	cmdutil.AddWaitFlags(fs, &flags.Wait, &flags.Timeout, DefaultTimeout, "the cluster has its new size")
	return cmd
}

// request turns the flags into a scale request.
func request(cmd *cobra.Command, flags *flagpole) (scale.Request, error) {
	var req scale.Request
	if cmd.Flags().Changed("control-plane") {
		req.ControlPlane = &flags.ControlPlane
	}
	if cmd.Flags().Changed("workers") {
		req.Workers = &flags.Workers
	}
	pools, err := scale.ParsePoolSizes(flags.Pools)
	if err != nil {
		return req, err
	}
	if len(pools) > 0 {
		req.Pools = pools
	}
	req.RemoveNodes = flags.RemoveNodes
	autoscale, err := scale.ParseAutoscale(flags.Autoscale)
	if err != nil {
		return req, fmt.Errorf("--autoscale: %w", err)
	}
	if len(autoscale) > 0 {
		req.Autoscale = autoscale
	}
	if req.ControlPlane == nil && req.Workers == nil && len(req.Pools) == 0 && len(req.Autoscale) == 0 {
		if len(req.RemoveNodes) > 0 {
			return req, errors.New("--remove-node needs the size its pool shrinks to: add --workers or --pool NAME=COUNT (or --control-plane)")
		}
		return req, errors.New("nothing to scale: set --control-plane, --workers, --pool NAME=COUNT or --autoscale POOL=MIN:MAX")
	}
	// Check what needs no cluster before contacting one.
	return req, req.Validate()
}

func runE(cmd *cobra.Command, logger logr.Logger, flags *flagpole, name string) error {
	req, err := request(cmd, flags)
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
	_, err = c.Scale(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, req, knest.ScaleWithWait(timeout))
	return err
}
