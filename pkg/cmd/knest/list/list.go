// Package list is `knest list`: a table of clusters, or their manifests.
package list

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/printers"
	"github.com/knest-dev/knest/pkg/knest"
)

type flagpole struct {
	AllNamespaces bool
	Output        string
}

// NewCommand returns the list command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List clusters",
		Example: `  knest list
  knest list -A
  knest list -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runE(cmd, logger, streams, flags)
		},
	}
	cmd.Flags().BoolVarP(&flags.AllNamespaces, "all-namespaces", "A", false, "list clusters of every namespace")
	cmd.Flags().StringVarP(&flags.Output, "output", "o", "", "yaml, json or name (default a table)")
	return cmd
}

func runE(cmd *cobra.Command, logger logr.Logger, streams genericiooptions.IOStreams, flags *flagpole) error {
	if err := cmdutil.CheckOutput(flags.Output, printers.YAML, printers.JSON, printers.Name); err != nil {
		return err
	}
	ns := ""
	if !flags.AllNamespaces {
		var err error
		if ns, _, err = cmdutil.Namespace(cmd); err != nil {
			return err
		}
	}
	c, err := cmdutil.NewClient(cmd, logger)
	if err != nil {
		return err
	}
	items, err := c.List(cmd.Context(), ns)
	if err != nil {
		return err
	}
	switch flags.Output {
	case printers.YAML, printers.JSON:
		objs := make([]client.Object, 0, len(items))
		for i := range items {
			objs = append(objs, &items[i])
		}
		return printers.Objects(streams.Out, flags.Output, objs, true, knest.Scheme())
	case printers.Name:
		return printers.Names(streams.Out, items)
	}
	if len(items) == 0 {
		if flags.AllNamespaces {
			logger.Info("No clusters found.")
		} else {
			logger.Info(fmt.Sprintf("No clusters found in namespace %s.", ns))
		}
		return nil
	}
	return printers.Table(streams.Out, items, flags.AllNamespaces, time.Now())
}
