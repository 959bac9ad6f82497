// Package upgrade holds knest's upgrade rules as pure functions: how an upgrade request
// changes a NestedCluster spec (the control plane's version, pools held back or
// released), and how to follow the machines Cluster API replaces meanwhile
// (machines.go).
package upgrade

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/validation"
)

// Request is what a person asked to change.
type Request struct {
	// Version is the Kubernetes version to run, v1.MINOR.PATCH.
	Version string
	// HoldPools are pools to keep at the version they run now.
	HoldPools []string
	// ReleasePools are held pools to let follow Version again.
	ReleasePools []string
}

// NormalizeVersion adds the leading v a person may leave out ("1.35.4"), as knest
// create does.
func NormalizeVersion(v string) string {
	if v != "" && !strings.HasPrefix(v, "v") {
		return "v" + v
	}
	return v
}

// Validate checks what can be checked without the cluster: the version's form and
// range, the pool names, and that no pool is named twice or both held and released.
// Apply calls it too.
func (r Request) Validate() error {
	if err := CheckVersion(r.Version); err != nil {
		return fmt.Errorf("version %q: %w", r.Version, err)
	}
	held := map[string]bool{}
	for _, p := range r.HoldPools {
		if err := checkPoolName(p); err != nil {
			return err
		}
		if held[p] {
			return fmt.Errorf("pool %s is named twice to be held", p)
		}
		held[p] = true
	}
	released := map[string]bool{}
	for _, p := range r.ReleasePools {
		if err := checkPoolName(p); err != nil {
			return err
		}
		if released[p] {
			return fmt.Errorf("pool %s is named twice to be released", p)
		}
		if held[p] {
			return fmt.Errorf("pool %s cannot be both held and released; name it once", p)
		}
		released[p] = true
	}
	return nil
}

// CheckVersion checks a version to upgrade to as the CRD does: v1.MINOR.PATCH within
// the minors the pinned Cluster API release supports (kubever.RangeMessage).
func CheckVersion(v string) error {
	if v == "" {
		return fmt.Errorf("no version to upgrade to: give the Kubernetes version, e.g. %s", knestv1.DefaultVersion)
	}
	if errs := validation.Version(v, field.NewPath("version")); len(errs) > 0 {
		return errors.New(errs[0].Detail)
	}
	return nil
}

func checkPoolName(p string) error {
	if errs := validation.PoolName(p, nil); len(errs) > 0 {
		return fmt.Errorf("pool %q: %s", p, errs[0].Detail)
	}
	return nil
}

// PoolVersion names a pool and a Kubernetes version.
type PoolVersion struct {
	Pool, Version string
}

// Plan is the outcome of a request.
type Plan struct {
	// Spec is the new spec.
	Spec knestv1.NestedClusterSpec
	// From and To are spec.version before and after.
	From, To string
	// Held are pools this request holds (their version is set), in spec order.
	Held []PoolVersion
	// Released are pools this request releases (their version is cleared): they
	// follow To.
	Released []string
	// StillHeld are pools held before and not named by the request (or named to be
	// held where they already are): they keep their version.
	StillHeld []PoolVersion
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool {
	return p.From == p.To && len(p.Held) == 0 && len(p.Released) == 0
}

// Changes lists in words what the plan changes: the control plane first, then pools
// in spec order.
func (p Plan) Changes() []string {
	var out []string
	if p.From != p.To {
		out = append(out, fmt.Sprintf("control plane %s -> %s", p.From, p.To))
	}
	for _, h := range p.Held {
		out = append(out, fmt.Sprintf("pool %s held at %s", h.Pool, h.Version))
	}
	for _, r := range p.Released {
		out = append(out, fmt.Sprintf("pool %s released to follow %s", r, p.To))
	}
	return out
}

// Apply applies req to nc (the current NestedCluster) and returns the new spec with
// what changes. It does not check the version rules between the old and the new spec
// (validation.Update does, as the API server) and does not modify nc.
//
// A held pool keeps the version it runs now (cluster.PoolVersion); a released pool's
// version is cleared so it follows spec.version; any other pool keeps its version, so
// a pool held before stays held.
func Apply(nc *knestv1.NestedCluster, req Request) (Plan, error) {
	if err := req.Validate(); err != nil {
		return Plan{}, err
	}
	names := make([]string, 0, len(nc.Spec.Workers))
	for _, p := range nc.Spec.Workers {
		names = append(names, p.Name)
	}
	for _, p := range append(slices.Clone(req.HoldPools), req.ReleasePools...) {
		if !slices.Contains(names, p) {
			return Plan{}, fmt.Errorf("the cluster has no worker pool %q; its pools are %s", p, listOrNone(names))
		}
	}

	spec := *nc.Spec.DeepCopy()
	plan := Plan{From: nc.Spec.Version, To: req.Version}
	spec.Version = req.Version
	for i := range spec.Workers {
		p := &spec.Workers[i]
		switch {
		case slices.Contains(req.HoldPools, p.Name):
			v := cluster.PoolVersion(nc, nc.Spec.Workers[i])
			if p.Version == v {
				plan.StillHeld = append(plan.StillHeld, PoolVersion{Pool: p.Name, Version: v})
				continue
			}
			p.Version = v
			plan.Held = append(plan.Held, PoolVersion{Pool: p.Name, Version: v})
		case slices.Contains(req.ReleasePools, p.Name):
			if p.Version == "" {
				return Plan{}, fmt.Errorf("pool %s is not held: it follows spec.version (%s); release only pools held at a version of their own", p.Name, nc.Spec.Version)
			}
			p.Version = ""
			plan.Released = append(plan.Released, p.Name)
		case p.Version != "":
			plan.StillHeld = append(plan.StillHeld, PoolVersion{Pool: p.Name, Version: p.Version})
		}
	}
	plan.Spec = spec
	return plan, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
