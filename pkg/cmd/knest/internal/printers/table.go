package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/scale"
)

// Table writes clusters as a kubectl-like table: NAME, PHASE, VERSION, CONTROL PLANE,
// WORKERS, ENDPOINT, AGE, with a leading NAMESPACE column when allNamespaces.
func Table(w io.Writer, items []knestv1.NestedCluster, allNamespaces bool, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	header := []string{"NAME", "PHASE", "VERSION", "CONTROL PLANE", "WORKERS", "ENDPOINT", "AGE"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i := range items {
		nc := &items[i]
		row := []string{
			nc.Name,
			orNone(string(nc.Status.Phase)),
			orNone(ListVersion(nc)),
			ControlPlaneReady(nc),
			WorkersReady(nc),
			orNone(nc.Status.Endpoint),
			Age(nc.CreationTimestamp.Time, now),
		}
		if allNamespaces {
			row = append([]string{nc.Namespace}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// Names writes kind/name lines (kubectl's -o name).
func Names(w io.Writer, items []knestv1.NestedCluster) error {
	for _, nc := range items {
		if _, err := fmt.Fprintf(w, "nestedcluster.%s/%s\n", knestv1.GroupVersion.Group, nc.Name); err != nil {
			return err
		}
	}
	return nil
}

// ControlPlaneReady is "ready/desired" of the control plane, the spec's size while the
// controller has not reported one.
func ControlPlaneReady(nc *knestv1.NestedCluster) string {
	if nc.Status.ControlPlaneReady != "" {
		return nc.Status.ControlPlaneReady
	}
	return fmt.Sprintf("%d/%d", nc.Status.ControlPlane.Ready, nc.Spec.ControlPlane.Replicas)
}

// WorkersReady is "ready/desired" over all pools, followed by the bounds of the
// autoscaled ones: "4/4 (burst auto 0-5)". An autoscaled pool the controller has not
// reported yet counts its minimum.
func WorkersReady(nc *knestv1.NestedCluster) string {
	var auto []string
	for _, p := range nc.Spec.Workers {
		if p.Autoscaling != nil {
			auto = append(auto, p.Name+" "+scale.Bounds(p.Autoscaling))
		}
	}
	bounds := ""
	if len(auto) > 0 {
		bounds = " (" + strings.Join(auto, ", ") + ")"
	}
	if nc.Status.WorkersReady != "" {
		return nc.Status.WorkersReady + bounds
	}
	var ready, desired int32
	for _, p := range nc.Spec.Workers {
		want, known := scale.PoolWant(nc, p)
		if !known {
			want = p.Autoscaling.MinReplicas
		}
		desired += want
	}
	for _, p := range nc.Status.Workers {
		ready += p.Ready
	}
	return fmt.Sprintf("%d/%d", ready, desired) + bounds
}

// Age is a kubectl-style age ("5m", "3d").
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
