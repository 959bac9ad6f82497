// Package scale holds knest's scaling rules as pure functions: how a scale request
// changes a NestedCluster spec, which Cluster API Machines to mark so exactly the
// named nodes go away, and when a NestedCluster's status has caught up with its spec.
package scale

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/validation"
)

// Request is what a person asked to change.
type Request struct {
	// ControlPlane is the new number of control-plane nodes (1, 3, 5 or 7).
	ControlPlane *int32
	// Workers is the new size of the default pool: the pool named "workers", or the
	// cluster's only pool.
	Workers *int32
	// Pools maps pool names to their new sizes.
	Pools map[string]int32
	// RemoveNodes names the nodes to remove when their pool (or the control plane)
	// shrinks. In CAPK a Node, its Machine and its VM share one name.
	RemoveNodes []string
	// Autoscale maps pool names to the autoscaling bounds they get; nil bounds turn a
	// pool's autoscaling off (it then needs a size: Pools, Workers, or
	// WithCurrentSizes). The name "" is the default pool.
	Autoscale map[string]*knestv1.PoolAutoscaling
}

// Empty reports whether the request asks for nothing.
func (r Request) Empty() bool {
	return r.ControlPlane == nil && r.Workers == nil && len(r.Pools) == 0 && len(r.RemoveNodes) == 0 && len(r.Autoscale) == 0
}

// Validate checks what can be checked without the cluster: the control-plane size,
// pool sizes in range, and no node named twice. Apply calls it too.
func (r Request) Validate() error {
	if r.Empty() {
		return fmt.Errorf("nothing to scale: set the control plane, a pool or the default pool's size")
	}
	if r.ControlPlane != nil {
		if err := checkControlPlane(*r.ControlPlane); err != nil {
			return err
		}
	}
	if r.Workers != nil {
		if err := checkPool("the default pool", *r.Workers); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Pools)) {
		if err := checkPool("pool "+name, r.Pools[name]); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Autoscale)) {
		a := r.Autoscale[name]
		if a == nil {
			continue
		}
		if name == "" {
			name = "the default pool"
		}
		if err := checkBounds(a); err != nil {
			return fmt.Errorf("autoscaling of %s: %w", name, err)
		}
	}
	seen := map[string]bool{}
	for _, node := range r.RemoveNodes {
		if seen[node] {
			return fmt.Errorf("node %s is named twice", node)
		}
		seen[node] = true
	}
	return nil
}

func checkPool(what string, n int32) error {
	if n < 0 || n > validation.MaxPoolReplicas {
		return fmt.Errorf("%s cannot have %d nodes: a pool has from 0 to %d", what, n, validation.MaxPoolReplicas)
	}
	return nil
}

// Machine is what the rules need to know about one Cluster API Machine.
type Machine struct {
	// Name of the Machine (and of its VM).
	Name string
	// NodeName is the tenant Node's name once it joined (the same as Name in CAPK).
	NodeName string
	// Pool is the worker pool, or knestv1.ControlPlanePool.
	Pool string
}

// MachineFrom reads a Cluster API Machine of the NestedCluster named cluster. The
// pool comes from the knest pool label knest puts on every Machine template, else
// from Cluster API's own labels.
func MachineFrom(m *clusterv1.Machine, cluster string) Machine {
	out := Machine{Name: m.Name, NodeName: m.Status.NodeRef.Name}
	switch {
	case m.Labels[knestv1.PoolNameLabel] != "":
		out.Pool = m.Labels[knestv1.PoolNameLabel]
	case hasKey(m.Labels, clusterv1.MachineControlPlaneLabel):
		out.Pool = knestv1.ControlPlanePool
	case m.Labels[clusterv1.MachineDeploymentNameLabel] != "":
		out.Pool = strings.TrimPrefix(m.Labels[clusterv1.MachineDeploymentNameLabel], cluster+"-")
	}
	return out
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// Change is one group whose size (or autoscaling) changes.
type Change struct {
	// Pool is the worker pool name, or knestv1.ControlPlanePool.
	Pool string
	// From and To are the sizes before and after, where the pool is not autoscaled.
	From, To int32
	// FromAuto and ToAuto are the autoscaling bounds before and after; nil where the
	// pool is (or becomes) not autoscaled.
	FromAuto, ToAuto *knestv1.PoolAutoscaling
}

func (c Change) String() string {
	what := "pool " + c.Pool
	if c.Pool == knestv1.ControlPlanePool {
		what = "control plane"
	}
	size := func(n int32, a *knestv1.PoolAutoscaling) string {
		if a != nil {
			return Bounds(a)
		}
		return strconv.Itoa(int(n))
	}
	return fmt.Sprintf("%s %s -> %s", what, size(c.From, c.FromAuto), size(c.To, c.ToAuto))
}

// resizes reports whether the change is a plain change of size.
func (c Change) resizes() bool { return c.FromAuto == nil && c.ToAuto == nil }

// Plan is the outcome of a request.
type Plan struct {
	// Spec is the new spec.
	Spec knestv1.NestedClusterSpec
	// Changes lists the groups whose size changes: the control plane first, then
	// pools in spec order.
	Changes []Change
	// MarkForDeletion are the Machines to annotate with Cluster API's
	// delete-machine annotation before the spec is applied.
	MarkForDeletion []string
}

// Apply applies req to spec (the current, defaulted spec of a NestedCluster) and
// returns the new spec and the Machines to mark for deletion. machines are the
// cluster's current Machines; they are only needed when req names nodes to remove.
// spec is not modified.
func Apply(spec knestv1.NestedClusterSpec, req Request, machines []Machine) (Plan, error) {
	if err := req.Validate(); err != nil {
		return Plan{}, err
	}
	out := *spec.DeepCopy()
	plan := Plan{}

	if req.ControlPlane != nil {
		n := *req.ControlPlane
		if from := out.ControlPlane.Replicas; from != n {
			plan.Changes = append(plan.Changes, Change{Pool: knestv1.ControlPlanePool, From: from, To: n})
			out.ControlPlane.Replicas = n
		}
	}

	sizes, err := poolSizes(out.Workers, req)
	if err != nil {
		return Plan{}, err
	}
	names := make([]string, 0, len(out.Workers))
	for _, p := range out.Workers {
		names = append(names, p.Name)
	}
	autoscale, err := autoscaleNames(names, req)
	if err != nil {
		return Plan{}, err
	}
	for i := range out.Workers {
		p := &out.Workers[i]
		n, ok := sizes[p.Name]
		if bounds, asked := autoscale[p.Name]; asked {
			var size *int32
			if ok {
				size = &n
			}
			ch, err := applyAutoscale(p, bounds, size, out.Version)
			if err != nil {
				return Plan{}, err
			}
			if ch != nil {
				plan.Changes = append(plan.Changes, *ch)
			}
			continue
		}
		if !ok {
			continue
		}
		if p.Autoscaling != nil {
			return Plan{}, autoscaledPoolError(p.Name, p.Autoscaling)
		}
		from := p.ReplicasOrDefault()
		if n > from && p.Version != "" && kubever.NewMachinesBlocked(p.Version, out.Version) {
			return Plan{}, heldPoolError(p.Name, p.Version, out.Version)
		}
		if from != n {
			plan.Changes = append(plan.Changes, Change{Pool: p.Name, From: from, To: n})
			p.Replicas = &n
		}
	}

	if plan.MarkForDeletion, err = nodesToRemove(req.RemoveNodes, plan.Changes, machines); err != nil {
		return Plan{}, err
	}
	plan.Spec = out
	return plan, nil
}

// heldPoolError says why a pool held at another minor than the control plane cannot
// grow, and what to do instead.
func heldPoolError(pool, held, cp string) error {
	return fmt.Errorf("pool %s is held at %s and the control plane runs %s: Cluster API creates machines only at the control plane's minor "+
		"(MachineSet preflight check KubeadmVersionSkew), so the pool cannot grow (nor have a failed node replaced); "+
		"let it catch up first (knest upgrade <cluster> --version %s --release-pool %s), then scale it", pool, held, cp, cp, pool)
}

func checkControlPlane(n int32) error {
	switch {
	case n <= 0:
		return fmt.Errorf("the control plane cannot be scaled to %d nodes; it needs 1, 3, 5 or 7 (to remove the cluster, delete it)", n)
	case n%2 == 0 && n < 8:
		return fmt.Errorf("the control plane cannot have %d nodes: it needs 1, 3, 5 or 7, because an even number of etcd members tolerates no more failures than %d and risks split votes", n, n-1)
	case !validation.ControlPlaneReplicasValid(n):
		return fmt.Errorf("the control plane cannot have %d nodes: it needs 1, 3, 5 or 7", n)
	}
	return nil
}

// poolSizes resolves the requested sizes by pool name, checking that every pool
// exists and every size is in range.
func poolSizes(pools []knestv1.WorkerPool, req Request) (map[string]int32, error) {
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	sizes := map[string]int32{}
	for _, name := range slices.Sorted(maps.Keys(req.Pools)) {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("the cluster has no worker pool %q; its pools are %s", name, listOrNone(names))
		}
		sizes[name] = req.Pools[name]
	}
	if req.Workers != nil {
		name, err := DefaultPool(names)
		if err != nil {
			return nil, err
		}
		if _, twice := sizes[name]; twice {
			return nil, fmt.Errorf("the size of pool %s is given twice (by the workers count and by its name); give it once", name)
		}
		sizes[name] = *req.Workers
	}
	return sizes, nil
}

// DefaultPool picks the pool a bare workers count refers to: the pool named
// "workers", else the only pool.
func DefaultPool(pools []string) (string, error) {
	switch {
	case slices.Contains(pools, knestv1.DefaultPoolName):
		return knestv1.DefaultPoolName, nil
	case len(pools) == 1:
		return pools[0], nil
	case len(pools) == 0:
		return "", fmt.Errorf("the cluster has no worker pools to scale")
	}
	return "", fmt.Errorf("the cluster has several worker pools (%s) and none named %s; name the pool to scale (pool=N)",
		strings.Join(pools, ", "), knestv1.DefaultPoolName)
}

// nodesToRemove checks the named nodes against the planned changes and returns the
// Machines to mark: each node must belong to a group that shrinks, and a group
// cannot lose more named nodes than it shrinks by.
func nodesToRemove(nodes []string, changes []Change, machines []Machine) ([]string, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	shrink := map[string]int32{}
	for _, c := range changes {
		if c.resizes() && c.To < c.From {
			shrink[c.Pool] = c.From - c.To
		}
	}
	var marked []string
	named := map[string]int32{}
	for _, node := range nodes {
		m, ok := findMachine(machines, node)
		if !ok {
			return nil, fmt.Errorf("node %s is not a node of this cluster; its nodes are %s", node, listOrNone(machineNames(machines)))
		}
		if _, ok := shrink[m.Pool]; !ok {
			return nil, fmt.Errorf("node %s belongs to %s, which this request does not scale down; lower its size to remove the node", node, describePool(m.Pool))
		}
		named[m.Pool]++
		marked = append(marked, m.Name)
	}
	for _, pool := range slices.Sorted(maps.Keys(named)) {
		if n, by := named[pool], shrink[pool]; n > by {
			return nil, fmt.Errorf("%d nodes of %s are named for removal but it shrinks by only %d; name at most %d or lower its size further",
				n, describePool(pool), by, by)
		}
	}
	return marked, nil
}

func findMachine(machines []Machine, node string) (Machine, bool) {
	for _, m := range machines {
		if m.Name == node || (m.NodeName != "" && m.NodeName == node) {
			return m, true
		}
	}
	return Machine{}, false
}

func machineNames(machines []Machine) []string {
	names := make([]string, 0, len(machines))
	for _, m := range machines {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

func describePool(pool string) string {
	if pool == knestv1.ControlPlanePool {
		return "the control plane"
	}
	return "pool " + pool
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// ParsePoolSizes parses NAME=N pairs (the --pool flag) into a map; a pool named twice
// is an error.
func ParsePoolSizes(pairs []string) (map[string]int32, error) {
	out := map[string]int32{}
	for _, pair := range pairs {
		name, count, ok := strings.Cut(pair, "=")
		if !ok || name == "" || count == "" {
			return nil, fmt.Errorf("pool %q must look like NAME=COUNT, e.g. gpu=2", pair)
		}
		n, err := strconv.ParseInt(count, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("pool %q: the count %q is not a whole number", pair, count)
		}
		if n < 0 || n > validation.MaxPoolReplicas {
			return nil, fmt.Errorf("pool %q: a pool has from 0 to %d nodes", pair, validation.MaxPoolReplicas)
		}
		if errs := validation.PoolName(name, nil); len(errs) > 0 {
			return nil, fmt.Errorf("pool %q: %s", pair, errs[0].ErrorBody())
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("pool %s is given twice", name)
		}
		out[name] = int32(n)
	}
	return out, nil
}
