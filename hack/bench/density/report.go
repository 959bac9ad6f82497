package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

type results struct {
	Started time.Time    `json:"started"`
	Options string       `json:"options"`
	Host    host         `json:"host"`
	Steps   []stepResult `json:"steps"`
}

// stepResult is what one step measured once its tenants were Ready and at rest.
type stepResult struct {
	Tenants int `json:"tenants"`
	// Created tenants at once in this step, and the seconds from the step's start
	// until each was Ready.
	Created      int       `json:"created"`
	ReadySeconds []float64 `json:"readySeconds"`
	// TenantUse is each tenant's use at rest: its namespace's containers.
	TenantUse []usage `json:"tenantUse"`
	// Components is the median over tenants of each container's use, by name.
	Components map[string]usage `json:"components"`
	// Stack is the use of each namespace of the shared management stack.
	Stack    map[string]usage `json:"stack"`
	StackNS  []string         `json:"stackNamespaces"`
	HostUse  usage            `json:"hostUse"`
	Capacity capacity         `json:"capacity"`
	GET      latency          `json:"get"`
	// Restarts of the tenants' containers so far (probes that gave up on a slow
	// start show here).
	Restarts int32 `json:"restarts"`
}

func (st *stepResult) summarize(s0, s1 sample, tenants map[string]bool, stack []string) {
	use := containerUse(s0, s1)
	perTenant := map[string]usage{}
	perComponent := map[string][]usage{}
	byTenantComponent := map[[2]string]usage{}
	st.Stack, st.StackNS = map[string]usage{}, stack
	for k, u := range use {
		if tenants[k.namespace] {
			perTenant[k.namespace] = perTenant[k.namespace].add(u)
			tc := [2]string{k.namespace, k.name}
			byTenantComponent[tc] = byTenantComponent[tc].add(u)
		}
		if slices.Contains(stack, k.namespace) {
			st.Stack[k.namespace] = st.Stack[k.namespace].add(u)
		}
	}
	for tc, u := range byTenantComponent {
		perComponent[tc[1]] = append(perComponent[tc[1]], u)
	}
	for _, ns := range sortedKeys(perTenant) {
		st.TenantUse = append(st.TenantUse, perTenant[ns])
	}
	st.Components = map[string]usage{}
	for name, us := range perComponent {
		st.Components[name] = usage{CPU: median(cpus(us)), MiB: median(mibs(us))}
	}
	for node, c := range s1.nodes {
		prev, ok := s0.nodes[node]
		st.HostUse = st.HostUse.add(rate(prev, c, ok))
	}
}

func cpus(us []usage) []float64 {
	out := make([]float64, len(us))
	for i, u := range us {
		out[i] = u.CPU
	}
	return out
}

func mibs(us []usage) []float64 {
	out := make([]float64, len(us))
	for i, u := range us {
		out[i] = u.MiB
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}

func printStep(w io.Writer, st stepResult) {
	fmt.Fprintf(w, "== %d tenants: Ready median %.0fs slowest %.0fs; per tenant %.0fm %.0fMiB; host %.2f/%.2f cores %.1f/%.1f GiB, requested %.2f cores; %s %.0fm %.0fMiB; GET p50 %.1fms p99 %.1fms (%d, %d failed); %d restarts\n",
		st.Tenants, median(st.ReadySeconds), maxOf(st.ReadySeconds), 1000*median(cpus(st.TenantUse)), median(mibs(st.TenantUse)),
		st.HostUse.CPU, st.Capacity.Allocatable.CPU, st.HostUse.MiB/1024, st.Capacity.Allocatable.MiB/1024, st.Capacity.Requested.CPU,
		st.StackNS[0], 1000*st.Stack[st.StackNS[0]].CPU, st.Stack[st.StackNS[0]].MiB, st.GET.P50ms, st.GET.P99ms, st.GET.Count, st.GET.Failed, st.Restarts)
}

func renderReport(r results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hosted tenants (no workers) on %d host node(s), kubelet %s, %.1f cores and %.1f GiB allocatable; started %s; `density %s`.\n\n",
		r.Host.Nodes, r.Host.Kubelet, r.Host.Allocatable.CPU, r.Host.Allocatable.MiB/1024, r.Started.Format(time.RFC3339), r.Options)
	b.WriteString("| tenants (created at once) | Ready, median / slowest (s) | per tenant at rest, median (mCPU, MiB) | host in use (cores, GiB) | host free (cores, GiB) | requested (cores, GiB) | knest controller (mCPU, MiB) | rest of the stack (mCPU, MiB) | tenant GET p50 / p99 (ms), failed | tenant container restarts |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range r.Steps {
		ready := "–"
		if st.Created > 0 {
			ready = fmt.Sprintf("%.0f / %.0f", median(st.ReadySeconds), maxOf(st.ReadySeconds))
		}
		tenant, get := "–", "–"
		if st.Tenants > 0 {
			tenant = fmt.Sprintf("%.0f, %.0f", 1000*median(cpus(st.TenantUse)), median(mibs(st.TenantUse)))
			get = fmt.Sprintf("%.1f / %.1f, %d of %d", st.GET.P50ms, st.GET.P99ms, st.GET.Failed, st.GET.Count+st.GET.Failed)
		}
		ctrl := st.Stack[st.StackNS[0]]
		var rest usage
		for _, ns := range st.StackNS[1:] {
			rest = rest.add(st.Stack[ns])
		}
		free := usage{CPU: st.Capacity.Allocatable.CPU - st.HostUse.CPU, MiB: st.Capacity.Allocatable.MiB - st.HostUse.MiB}
		fmt.Fprintf(&b, "| %d (%d) | %s | %s | %.2f, %.1f | %.2f, %.1f | %.2f, %.1f | %.0f, %.0f | %.0f, %.0f | %s | %d |\n",
			st.Tenants, st.Created, ready, tenant, st.HostUse.CPU, st.HostUse.MiB/1024, free.CPU, free.MiB/1024,
			st.Capacity.Requested.CPU, st.Capacity.Requested.MiB/1024, 1000*ctrl.CPU, ctrl.MiB, 1000*rest.CPU, rest.MiB, get, st.Restarts)
	}
	last := r.Steps[len(r.Steps)-1]
	fmt.Fprintf(&b, "\nPer container of a tenant at %d tenants, median over tenants (mCPU, MiB): ", last.Tenants)
	var parts []string
	for _, name := range sortedKeys(last.Components) {
		u := last.Components[name]
		parts = append(parts, fmt.Sprintf("%s %.1f, %.0f", name, 1000*u.CPU, u.MiB))
	}
	b.WriteString(strings.Join(parts, "; ") + ".\n")
	fmt.Fprintf(&b, "\nThe stack at %d tenants (mCPU, MiB): ", last.Tenants)
	parts = parts[:0]
	for _, ns := range last.StackNS {
		u := last.Stack[ns]
		parts = append(parts, fmt.Sprintf("%s %.0f, %.0f", ns, 1000*u.CPU, u.MiB))
	}
	b.WriteString(strings.Join(parts, "; ") + ".\n")
	return b.String()
}
