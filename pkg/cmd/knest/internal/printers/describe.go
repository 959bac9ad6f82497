package printers

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
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
	field("Version", "%s", arrow(st.Version, s.Version))
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
	fmt.Fprintln(tw, "  POOL\tDESIRED\tREADY\tUP-TO-DATE\tVERSION\tCPU\tMEMORY\tROOT DISK\tIMAGE")
	cp := s.ControlPlane
	fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", knestv1.ControlPlanePool, cp.Replicas, st.ControlPlane.Ready,
		st.ControlPlane.UpToDate, arrow(st.Version, s.Version), cp.CPU, quantity(cp.MachineSpec), rootDisk(cp.MachineSpec), orDefault(cp.Image))
	for _, p := range s.Workers {
		got, _ := scale.PoolStatus(nc, p.Name)
		version := arrow(poolStatusVersion(nc, p.Name), cluster.PoolVersion(nc, p))
		if p.Version != "" {
			version += " (held)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", p.Name, PoolDesired(nc, p), got.Ready, got.UpToDate, version,
			p.CPU, quantity(p.MachineSpec), rootDisk(p.MachineSpec), orDefault(p.Image))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if notes := VersionNotes(nc); len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Versions:")
		for _, n := range notes {
			fmt.Fprintln(w, "  "+n)
		}
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
	field("Backups", "%s", backups(nc, now))
	if r := st.Backup.Restore; r != nil {
		field("Restore", "%s from %s%s", r.Phase, r.Snapshot, prefixed(": ", r.Message))
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

// backups says how the schedule runs and which snapshot is the last.
func backups(nc *knestv1.NestedCluster, now time.Time) string {
	b, st := nc.Spec.Backup, nc.Status.Backup
	schedule := "none scheduled"
	if b.Interval == nil || b.Interval.Duration > 0 {
		every := knestv1.DefaultBackupInterval
		if b.Interval != nil {
			every = b.Interval.Duration
		}
		schedule = fmt.Sprintf("every %s, keeping %d", shortDuration(every), max(b.Keep, 1))
	}
	last := "no snapshot yet"
	if s := st.LastSnapshot; s != nil {
		last = fmt.Sprintf("last %s (%s ago, %d on the volume)", s.Name, Age(s.TakenAt.Time, now), len(st.Snapshots))
	}
	return schedule + "; " + last + prefixed("; last failure: ", oneLine(st.LastFailure))
}

// shortDuration drops the zero minutes and seconds Duration.String prints (1h0m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// PoolDesired is the DESIRED column of a pool: its size, or for an autoscaled pool
// the size the autoscaler set and its bounds, "3 (auto 0-5)" ("auto 0-5" while the
// controller has not reported a size).
func PoolDesired(nc *knestv1.NestedCluster, p knestv1.WorkerPool) string {
	want, known := scale.PoolWant(nc, p)
	if p.Autoscaling == nil {
		return strconv.Itoa(int(want))
	}
	if !known {
		return scale.Bounds(p.Autoscaling)
	}
	return fmt.Sprintf("%d (%s)", want, scale.Bounds(p.Autoscaling))
}

// VersionNotes says in words where versions differ: a control plane or pool whose
// machines are not all up to date ("rolling: 1 of 2 up to date"), a control plane
// still upgrading, and a pool at another version than the control plane runs (held
// or not yet rolled).
func VersionNotes(nc *knestv1.NestedCluster) []string {
	s, st := nc.Spec, nc.Status
	var out []string
	cpRuns := cmp.Or(st.Version, s.Version)
	if st.Version != "" && st.Version != s.Version {
		out = append(out, fmt.Sprintf("control plane upgrading: runs %s, rolling to %s", st.Version, s.Version))
	}
	if cp := st.ControlPlane; cp.UpToDate < cp.Current {
		out = append(out, fmt.Sprintf("control plane rolling: %d of %d up to date", cp.UpToDate, cp.Current))
	}
	for _, p := range s.Workers {
		got, _ := scale.PoolStatus(nc, p.Name)
		at := cmp.Or(poolStatusVersion(nc, p.Name), cluster.PoolVersion(nc, p))
		switch {
		case p.Version != "" && at != cpRuns:
			out = append(out, fmt.Sprintf("pool %s is held at %s; control plane runs %s", p.Name, at, cpRuns))
		case p.Version != "":
			out = append(out, fmt.Sprintf("pool %s is held at %s, the control plane's version; it stays there when the cluster is upgraded", p.Name, at))
		case at != cpRuns:
			out = append(out, fmt.Sprintf("pool %s is rolled to %s; control plane runs %s", p.Name, at, cpRuns))
		}
		if got.UpToDate < got.Current {
			out = append(out, fmt.Sprintf("pool %s rolling: %d of %d up to date", p.Name, got.UpToDate, got.Current))
		}
	}
	return out
}

// ListVersion is the VERSION of `knest list`: the control plane's, "from → to" while
// it upgrades, then the pools that run another version (rolling after it, or held).
func ListVersion(nc *knestv1.NestedCluster) string {
	s, st := nc.Spec, nc.Status
	out := arrow(st.Version, s.Version)
	cpRuns := cmp.Or(st.Version, s.Version)
	for _, p := range s.Workers {
		if at := cmp.Or(poolStatusVersion(nc, p.Name), cluster.PoolVersion(nc, p)); at != cpRuns {
			out += fmt.Sprintf(", pool %s %s", p.Name, at)
		}
	}
	return out
}

// poolStatusVersion is the version the controller reports for a pool's machines.
func poolStatusVersion(nc *knestv1.NestedCluster, pool string) string {
	for _, p := range nc.Status.Workers {
		if p.Name == pool {
			return p.Version
		}
	}
	return ""
}

// arrow is "from → to" when a version moves, else the one version.
func arrow(from, to string) string {
	switch {
	case to == "":
		return orNone(from)
	case from == "" || from == to:
		return to
	}
	return from + " → " + to
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
