// Package get is `knest get` (alias describe): a readable description of clusters, or
// their manifests.
package get

import (
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
)

type flagpole struct {
	Output string
}

// NewCommand returns the get command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:     "get NAME...",
		Aliases: []string{"describe"},
		Short:   "Describe clusters",
		Long: "Describe clusters: what each asks for, how many nodes per pool are ready, its\n" +
			"conditions with reasons, and where its kubeconfig is. -o prints the manifest.",
		Example: `  knest get demo
  knest get demo -o yaml`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(cmd, logger, streams, flags, args)
		},
	}
	cmd.Flags().StringVarP(&flags.Output, "output", "o", "", "yaml or json (default a description)")
	return cmd
}

func runE(cmd *cobra.Command, logger logr.Logger, streams genericiooptions.IOStreams, flags *flagpole, names []string) error {
	if err := cmdutil.CheckOutput(flags.Output, printers.YAML, printers.JSON); err != nil {
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
	var objs []client.Object
	for _, name := range names {
		nc, err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name})
		if err != nil {
			return err
		}
		objs = append(objs, nc)
	}
	if flags.Output != "" {
		return printers.Objects(streams.Out, flags.Output, objs, len(objs) > 1, knest.Scheme())
	}
	now := time.Now()
	for i, o := range objs {
		if i > 0 {
			fmt.Fprintln(streams.Out)
		}
		if err := printers.Describe(streams.Out, o.(*knestv1.NestedCluster), now); err != nil {
			return err
		}
	}
	return nil
}
