// Package version is `knest version`.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at build time:
//
//	go build -ldflags "-X github.com/knest-dev/knest/pkg/cmd/knest/version.version=v0.1.0" ./cmd/knest
var version = ""

// Version returns the knest CLI version: the one stamped at build time, else the Go
// module version, else "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// DisplayVersion is what `knest version` prints.
func DisplayVersion() string {
	return fmt.Sprintf("knest %s %s %s/%s", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// NewCommand returns the version command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the knest CLI version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if logger.V(0).Enabled() { // -q prints the bare version
				_, err := fmt.Fprintln(streams.Out, DisplayVersion())
				return err
			}
			_, err := fmt.Fprintln(streams.Out, Version())
			return err
		},
	}
}
