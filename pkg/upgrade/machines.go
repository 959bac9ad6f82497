package upgrade

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/scale"
)

// Machine is what following an upgrade needs to know about one Cluster API Machine.
type Machine struct {
	// Name of the Machine (and of its VM).
	Name string
	// Pool is the worker pool, or knestv1.ControlPlanePool.
	Pool string
	// Version is the Kubernetes version Cluster API builds the machine at (its
	// spec.version).
	Version string
	// Node is the tenant Node's name once it joined.
	Node string
	// Kubelet is the kubelet version the Node reports (status.nodeInfo).
	Kubelet string
	// Ready: the Node joined and is Ready (Cluster API's NodeReady or Ready
	// condition is True).
	Ready bool
	// Deleting: Cluster API drains and removes the machine.
	Deleting bool
}

// MachineFrom reads a Cluster API Machine of the NestedCluster named cluster.
func MachineFrom(m *clusterv1.Machine, cluster string) Machine {
	out := Machine{
		Name:     m.Name,
		Pool:     scale.MachineFrom(m, cluster).Pool,
		Version:  m.Spec.Version,
		Node:     m.Status.NodeRef.Name,
		Deleting: m.DeletionTimestamp != nil,
	}
	if m.Status.NodeInfo != nil {
		out.Kubelet = m.Status.NodeInfo.KubeletVersion
	}
	out.Ready = out.Node != "" && (meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineNodeReadyCondition) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition))
	return out
}

// Snapshot is the machines of a cluster at one moment, by name.
type Snapshot map[string]Machine

// NewSnapshot indexes machines by name.
func NewSnapshot(machines []Machine) Snapshot {
	s := make(Snapshot, len(machines))
	for _, m := range machines {
		s[m.Name] = m
	}
	return s
}

// EventType is what happened to a machine between two snapshots.
type EventType string

const (
	// MachineCreated: the machine is new.
	MachineCreated EventType = "Created"
	// MachineReady: its node joined and became Ready.
	MachineReady EventType = "Ready"
	// MachineDeleting: Cluster API started draining and removing it.
	MachineDeleting EventType = "Deleting"
	// MachineDeleted: it is gone.
	MachineDeleted EventType = "Deleted"
)

// Event is one thing that happened to a machine.
type Event struct {
	Type    EventType
	Machine Machine
}

// Diff returns what happened between prev and cur: machines that appeared, became
// Ready, started being deleted, or are gone. A machine that appears Ready at once
// gives both Created and Ready. Events come the control plane first, then pools in
// the order given; within one, in the order of a rolling update (new machines, nodes
// ready, machines drained, machines gone), then by machine name.
func Diff(prev, cur Snapshot, pools []string) []Event {
	var out []Event
	for name, m := range cur {
		was, existed := prev[name]
		if !existed {
			out = append(out, Event{Type: MachineCreated, Machine: m})
		}
		if m.Ready && (!existed || !was.Ready) {
			out = append(out, Event{Type: MachineReady, Machine: m})
		}
		if m.Deleting && (!existed || !was.Deleting) {
			out = append(out, Event{Type: MachineDeleting, Machine: m})
		}
	}
	for name, m := range prev {
		if _, ok := cur[name]; !ok {
			out = append(out, Event{Type: MachineDeleted, Machine: m})
		}
	}
	order := map[EventType]int{MachineCreated: 0, MachineReady: 1, MachineDeleting: 2, MachineDeleted: 3}
	slices.SortStableFunc(out, func(a, b Event) int {
		return cmp.Or(comparePools(a.Machine, b.Machine, pools), cmp.Compare(order[a.Type], order[b.Type]),
			cmp.Compare(a.Machine.Name, b.Machine.Name))
	})
	return out
}

// Sort orders machines for people: the control plane first, then pools in the order
// given (pools not in it after those, by name), then by machine name.
func Sort(machines []Machine, pools []string) {
	slices.SortStableFunc(machines, func(a, b Machine) int { return compareMachines(a, b, pools) })
}

func compareMachines(a, b Machine, pools []string) int {
	return cmp.Or(comparePools(a, b, pools), cmp.Compare(a.Name, b.Name))
}

func comparePools(a, b Machine, pools []string) int {
	return cmp.Or(cmp.Compare(poolRank(a.Pool, pools), poolRank(b.Pool, pools)), cmp.Compare(a.Pool, b.Pool))
}

func poolRank(pool string, pools []string) int {
	if pool == knestv1.ControlPlanePool {
		return -1
	}
	if i := slices.Index(pools, pool); i >= 0 {
		return i
	}
	return len(pools)
}

// Tracker follows a cluster's machines through an upgrade from a first snapshot, so
// each step of each machine is reported once, with the time since the start. A
// stale read (a machine listed again after it was gone, or Ready again after a
// read that was not) reports nothing new.
type Tracker struct {
	started time.Time
	pools   []string
	last    Snapshot
	gone    map[string]bool
	seen    map[string]map[EventType]bool
}

// TimedEvent is an event with the time since the tracker started.
type TimedEvent struct {
	Event
	After time.Duration
}

// NewTracker starts following from the machines that exist at started; pools orders
// the pools' events.
func NewTracker(started time.Time, machines []Machine, pools []string) *Tracker {
	t := &Tracker{started: started, pools: pools, last: NewSnapshot(machines), gone: map[string]bool{}, seen: map[string]map[EventType]bool{}}
	for _, e := range Diff(nil, t.last, pools) {
		t.mark(e)
	}
	return t
}

// Observe takes the machines listed at now and returns the events not reported yet.
func (t *Tracker) Observe(machines []Machine, now time.Time) []TimedEvent {
	cur := Snapshot{}
	for _, m := range machines {
		if !t.gone[m.Name] {
			cur[m.Name] = m
		}
	}
	var out []TimedEvent
	for _, e := range Diff(t.last, cur, t.pools) {
		if t.seen[e.Machine.Name][e.Type] {
			continue
		}
		t.mark(e)
		if e.Type == MachineDeleted {
			t.gone[e.Machine.Name] = true
		}
		out = append(out, TimedEvent{Event: e, After: now.Sub(t.started)})
	}
	t.last = cur
	return out
}

func (t *Tracker) mark(e Event) {
	if t.seen[e.Machine.Name] == nil {
		t.seen[e.Machine.Name] = map[EventType]bool{}
	}
	t.seen[e.Machine.Name][e.Type] = true
}

// Machines returns the machines of the last snapshot, sorted.
func (t *Tracker) Machines() []Machine {
	out := make([]Machine, 0, len(t.last))
	for _, m := range t.last {
		out = append(out, m)
	}
	Sort(out, t.pools)
	return out
}

// Behind returns the machines of the last snapshot that Cluster API has not yet
// rebuilt at the version nc asks for (spec.version for the control plane, the
// pool's version for a pool), sorted.
func (t *Tracker) Behind(nc *knestv1.NestedCluster) []Machine {
	var out []Machine
	for _, m := range t.Machines() {
		if want := WantVersion(nc, m.Pool); want != "" && m.Version != want {
			out = append(out, m)
		}
	}
	return out
}

// WantVersion is the version nc asks for in pool (knestv1.ControlPlanePool for the
// control plane); empty for a pool nc does not have.
func WantVersion(nc *knestv1.NestedCluster, pool string) string {
	if pool == knestv1.ControlPlanePool {
		return nc.Spec.Version
	}
	for _, p := range nc.Spec.Workers {
		if p.Name == pool {
			return cluster.PoolVersion(nc, p)
		}
	}
	return ""
}

// String is the event as a progress line, e.g. "control plane: new machine
// demo-cp-x7k2p at v1.35.4 (after 4s)".
func (e TimedEvent) String() string {
	m := e.Machine
	var what string
	switch e.Type {
	case MachineCreated:
		what = fmt.Sprintf("new machine %s at %s", m.Name, orUnknown(m.Version))
	case MachineReady:
		what = fmt.Sprintf("node %s ready at %s", m.Node, orUnknown(cmp.Or(m.Kubelet, m.Version)))
	case MachineDeleting:
		what = fmt.Sprintf("machine %s (%s) is being drained and removed", m.Name, orUnknown(m.Version))
	case MachineDeleted:
		what = fmt.Sprintf("machine %s (%s) removed", m.Name, orUnknown(m.Version))
	}
	return fmt.Sprintf("%s: %s (after %s)", PoolTitle(m.Pool), what, e.After.Round(time.Second))
}

// PoolTitle names a pool in progress lines: "control plane", "workers" for the
// default pool, else "pool NAME".
func PoolTitle(pool string) string {
	switch pool {
	case knestv1.ControlPlanePool:
		return "control plane"
	case knestv1.DefaultPoolName:
		return pool
	case "":
		return "unknown pool"
	}
	return "pool " + pool
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown version>"
	}
	return s
}
