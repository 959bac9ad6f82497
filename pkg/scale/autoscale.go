package scale

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/validation"
)

// AutoscaleOff is the value of --autoscale POOL=off: the pool's size is knest's
// again.
const AutoscaleOff = "off"

// ParseAutoscale parses POOL=MIN:MAX and POOL=off pairs (the --autoscale flag) into
// bounds by pool name; off gives nil bounds. A bare MIN:MAX (or off) names the
// default pool and is returned under the name "". A pool named twice is an error.
func ParseAutoscale(pairs []string) (map[string]*knestv1.PoolAutoscaling, error) {
	out := map[string]*knestv1.PoolAutoscaling{}
	for _, pair := range pairs {
		name, bounds, ok := strings.Cut(pair, "=")
		if !ok {
			name, bounds = "", pair
		}
		if bounds == "" {
			return nil, fmt.Errorf("autoscale %q must look like POOL=MIN:MAX or POOL=%s, e.g. gpu=0:4", pair, AutoscaleOff)
		}
		if name != "" {
			if errs := validation.PoolName(name, nil); len(errs) > 0 {
				return nil, fmt.Errorf("autoscale %q: %s", pair, errs[0].ErrorBody())
			}
		} else if ok {
			return nil, fmt.Errorf("autoscale %q needs a pool name before '=', e.g. gpu=0:4", pair)
		}
		if _, dup := out[name]; dup {
			if name == "" {
				return nil, fmt.Errorf("the default pool's autoscaling is given twice")
			}
			return nil, fmt.Errorf("pool %s's autoscaling is given twice", name)
		}
		if strings.EqualFold(bounds, AutoscaleOff) {
			out[name] = nil
			continue
		}
		a, err := parseBounds(bounds)
		if err != nil {
			return nil, fmt.Errorf("autoscale %q: %w", pair, err)
		}
		out[name] = a
	}
	return out, nil
}

func parseBounds(s string) (*knestv1.PoolAutoscaling, error) {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("the bounds must be MIN:MAX, e.g. 0:4, or %s", AutoscaleOff)
	}
	minN, errMin := strconv.ParseInt(lo, 10, 32)
	maxN, errMax := strconv.ParseInt(hi, 10, 32)
	if errMin != nil || errMax != nil {
		return nil, fmt.Errorf("MIN and MAX must be whole numbers, e.g. 0:4")
	}
	a := &knestv1.PoolAutoscaling{MinReplicas: int32(minN), MaxReplicas: int32(maxN)}
	return a, checkBounds(a)
}

// checkBounds checks autoscaling bounds as the CRD does.
func checkBounds(a *knestv1.PoolAutoscaling) error {
	switch {
	case a.MinReplicas < 0 || a.MinReplicas > validation.MaxPoolReplicas:
		return fmt.Errorf("the minimum must be from 0 to %d", validation.MaxPoolReplicas)
	case a.MaxReplicas < 1 || a.MaxReplicas > validation.MaxPoolReplicas:
		return fmt.Errorf("the maximum must be from 1 to %d", validation.MaxPoolReplicas)
	case a.MinReplicas > a.MaxReplicas:
		return fmt.Errorf("the minimum (%d) must be at most the maximum (%d)", a.MinReplicas, a.MaxReplicas)
	}
	return nil
}

// Bounds formats autoscaling bounds as the CLI shows them: "auto MIN-MAX".
func Bounds(a *knestv1.PoolAutoscaling) string {
	return fmt.Sprintf("auto %d-%d", a.MinReplicas, a.MaxReplicas)
}

// autoscaledPoolError says why an autoscaled pool cannot be given a size, and what to
// do instead.
func autoscaledPoolError(pool string, a *knestv1.PoolAutoscaling) error {
	return fmt.Errorf("pool %s is autoscaled (%d to %d nodes): the autoscaler sets its size; change its bounds with --autoscale %s=MIN:MAX, "+
		"or turn autoscaling off and size it yourself with --autoscale %s=%s --pool %s=N",
		pool, a.MinReplicas, a.MaxReplicas, pool, pool, AutoscaleOff, pool)
}

// heldAutoscaleError says why a pool held at another minor cannot be autoscaled.
func heldAutoscaleError(pool, held, cp string) error {
	return fmt.Errorf("pool %s is held at %s and the control plane runs %s: the autoscaler could add no node to it, because Cluster API creates machines only at the control plane's minor "+
		"(MachineSet preflight check KubeadmVersionSkew); let it catch up first (knest upgrade <cluster> --version %s --release-pool %s), then autoscale it", pool, held, cp, cp, pool)
}

// autoscaleNames resolves the pools req.Autoscale names ("" is the default pool).
func autoscaleNames(pools []string, req Request) (map[string]*knestv1.PoolAutoscaling, error) {
	out := map[string]*knestv1.PoolAutoscaling{}
	for _, name := range slices.Sorted(maps.Keys(req.Autoscale)) {
		resolved := name
		if name == "" {
			var err error
			if resolved, err = DefaultPool(pools); err != nil {
				return nil, err
			}
			if _, twice := req.Autoscale[resolved]; twice {
				return nil, fmt.Errorf("pool %s's autoscaling is given twice (bare and by its name); give it once", resolved)
			}
		} else if !slices.Contains(pools, name) {
			return nil, fmt.Errorf("the cluster has no worker pool %q; its pools are %s", name, listOrNone(pools))
		}
		out[resolved] = req.Autoscale[name]
	}
	return out, nil
}

// applyAutoscale sets or clears pool p's autoscaling as asked (bounds nil: off) and
// returns the change, if any. size is the size the request gives the pool (nil: none);
// turning autoscaling off needs one (WithCurrentSizes fills it from the status).
func applyAutoscale(p *knestv1.WorkerPool, bounds *knestv1.PoolAutoscaling, size *int32, cpVersion string) (*Change, error) {
	was := p.Autoscaling
	switch {
	case bounds == nil && was == nil:
		return nil, nil // already off
	case bounds == nil:
		if size == nil {
			return nil, fmt.Errorf("pool %s: turning autoscaling off needs the size it keeps: add --pool %s=N", p.Name, p.Name)
		}
		p.Autoscaling = nil
		p.Replicas = ptrTo(*size)
		return &Change{Pool: p.Name, FromAuto: was, To: *size}, nil
	case size != nil:
		return nil, autoscaledPoolError(p.Name, bounds)
	case p.Version != "" && kubever.NewMachinesBlocked(p.Version, cpVersion):
		return nil, heldAutoscaleError(p.Name, p.Version, cpVersion)
	case was != nil && *was == *bounds:
		return nil, nil
	}
	ch := &Change{Pool: p.Name, FromAuto: was, ToAuto: bounds.DeepCopy()}
	if was == nil {
		ch.From = p.ReplicasOrDefault()
	}
	p.Autoscaling = bounds.DeepCopy()
	p.Replicas = nil
	return ch, nil
}

// WithCurrentSizes returns req with a size for every pool whose autoscaling it turns
// off without one: the size the autoscaler last set (status.workers[].desired), so the
// pool keeps the nodes it has. A pool the controller has not reported keeps its
// minimum.
func WithCurrentSizes(req Request, nc *knestv1.NestedCluster) Request {
	names := make([]string, 0, len(nc.Spec.Workers))
	for _, p := range nc.Spec.Workers {
		names = append(names, p.Name)
	}
	resolved, err := autoscaleNames(names, req)
	if err != nil {
		return req // Apply reports it
	}
	defaultPool, _ := DefaultPool(names)
	for name, bounds := range resolved {
		if bounds != nil {
			continue
		}
		if _, sized := req.Pools[name]; sized {
			continue
		}
		if req.Workers != nil && name == defaultPool {
			continue
		}
		for _, p := range nc.Spec.Workers {
			if p.Name != name || p.Autoscaling == nil {
				continue
			}
			n := p.Autoscaling.MinReplicas
			if got, ok := PoolWant(nc, p); ok {
				n = got
			}
			pools := maps.Clone(req.Pools)
			if pools == nil {
				pools = map[string]int32{}
			}
			pools[name] = n
			req.Pools = pools
		}
	}
	return req
}

func ptrTo[T any](v T) *T { return &v }
