package printers

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/knest-dev/knest/pkg/upgrade"
)

// NodeVersions writes, per Machine, its pool (control-plane for the control plane),
// its name, its node and the kubelet version the node reports: the versions the
// nodes actually run.
func NodeVersions(w io.Writer, machines []upgrade.Machine) error {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "POOL\tMACHINE\tNODE\tKUBELET")
	for _, m := range machines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", orNone(m.Pool), m.Name, orNone(m.Node), orNone(m.Kubelet))
	}
	return tw.Flush()
}
