package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/scale"
)

// Describe writes a readable description of a NestedCluster: what it asks for, how
// far it got per role and pool, its conditions with reasons, and where its kubeconfig
// is.
func Describe(w io.Writer, nc *knestv1.NestedCluster, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	s, st := nc.Spec, nc.Status
	field := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", name, fmt.Sprintf(format, args...))
	}
	field("Name", "%s", nc.Name)
	field("Namespace", "%s", nc.Namespace)
	field("Phase", "%s", orNone(string(st.Phase)))
	version := orNone(s.Version)
	if st.Version != "" && st.Version != s.Version {
		version += fmt.Sprintf(" (running %s)", st.Version)
	}
	field("Version", "%s", version)
	field("Endpoint", "%s", orNone(st.Endpoint))
	if s.Paused {
		field("Paused", "true (knest and Cluster API leave the cluster alone)")
	}
	field("Age", "%s", Age(nc.CreationTimestamp.Time, now))
	if nc.DeletionTimestamp != nil {
		field("Deleting", "since %s ago, waiting for %s", Age(nc.DeletionTimestamp.Time, now), strings.Join(nc.Finalizers, ", "))
	}
	if st.ObservedGeneration < nc.Generation {
		field("Observed", "generation %d of %d (the controller has not caught up with the latest change)", st.ObservedGeneration, nc.Generation)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Nodes:")
	tw = printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  POOL\tDESIRED\tREADY\tCPU\tMEMORY\tROOT DISK\tIMAGE")
	cp := s.ControlPlane
	fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\t%s\n", knestv1.ControlPlanePool, cp.Replicas, st.ControlPlane.Ready,
		cp.CPU, quantity(cp.MachineSpec), rootDisk(cp.MachineSpec), orDefault(cp.Image))
	for _, p := range s.Workers {
		want := int32(1)
		if p.Replicas != nil {
			want = *p.Replicas
		}
		got, _ := scale.PoolStatus(nc, p.Name)
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Name, want, got.Ready,
			p.CPU, quantity(p.MachineSpec), rootDisk(p.MachineSpec), orDefault(p.Image))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = printers.GetNewTabWriter(w)
	n := s.Network
	field("Network", "pods %s, services %s, DNS domain %s, CNI %s", n.PodCIDR, n.ServiceCIDR, n.DNSDomain, n.CNI)
	api := fmt.Sprintf("Service type %s", s.APIServer.ServiceType)
	if s.APIServer.Host != "" {
		api += ", host " + s.APIServer.Host
	}
	if len(s.APIServer.CertSANs) > 0 {
		api += ", extra SANs " + strings.Join(s.APIServer.CertSANs, ", ")
	}
	field("API server", "%s", api)
	if st.KubeconfigSecretName != "" {
		field("Kubeconfig", "Secret %s/%s (key %q); knest kubeconfig %s -n %s", nc.Namespace, st.KubeconfigSecretName, "value", nc.Name, nc.Namespace)
	} else {
		field("Kubeconfig", "not yet available")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "Conditions: none reported yet (is the knest controller running?)")
		return nil
	}
	fmt.Fprintln(w, "Conditions:")
	tw = printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orNone(c.Reason), Age(c.LastTransitionTime.Time, now), oneLine(c.Message))
	}
	return tw.Flush()
}

func quantity(m knestv1.MachineSpec) string {
	if m.Memory == nil {
		return "<default>"
	}
	return m.Memory.String()
}

func rootDisk(m knestv1.MachineSpec) string {
	d := string(m.RootDisk.Type)
	if d == "" {
		d = string(knestv1.RootDiskContainerDisk)
	}
	if m.RootDisk.Size != nil {
		d += " " + m.RootDisk.Size.String()
	}
	return d
}

func orDefault(s string) string {
	if s == "" {
		return "<default>"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
