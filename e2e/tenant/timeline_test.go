//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// timeline records when each phase was first seen. It is a measurement: nothing
// asserts on it.
type timeline struct {
	mu      sync.Mutex
	started time.Time
	rows    []timelineRow
	figures []timelineFigure
}

type timelineRow struct {
	Step, Milestone string
	After           time.Duration // since the step started
}

// timelineFigure is a measurement that is not a point in time: a count, a longest
// window, minutes per machine.
type timelineFigure struct {
	Step, Name, Value string
}

func newTimeline() *timeline { return &timeline{started: time.Now()} }

// add records a milestone and prints it at once: a run killed from outside (CI's
// time limit) still shows how far it got.
func (tl *timeline) add(step, milestone string, after time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.rows = append(tl.rows, timelineRow{step, milestone, after.Round(time.Second)})
	fmt.Printf("%s timeline: %s: %s after %s\n", time.Now().Format(time.TimeOnly), step, milestone, after.Round(time.Second))
}

func (tl *timeline) figure(step, name, value string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.figures = append(tl.figures, timelineFigure{step, name, value})
}

func (tl *timeline) summary() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	b.WriteString("Timeline (seconds since the start of each step):\n")
	for _, r := range tl.rows {
		fmt.Fprintf(&b, "  %-28s %-44s %6.0f\n", r.Step, r.Milestone, r.After.Seconds())
	}
	if len(tl.figures) > 0 {
		b.WriteString("Figures:\n")
		for _, f := range tl.figures {
			fmt.Fprintf(&b, "  %-28s %-44s %s\n", f.Step, f.Name, f.Value)
		}
	}
	return b.String()
}

func (tl *timeline) write(path string) error {
	tl.mu.Lock()
	rows := append([]timelineRow(nil), tl.rows...)
	figures := append([]timelineFigure(nil), tl.figures...)
	tl.mu.Unlock()
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# knest e2e timeline\n\nRun %s on %s. Seconds since the start of each step; "+
		"milestones are the first poll (every 5 s) that saw them, except an upgrade's machines "+
		"(created, node Ready, deleting: from the objects' own timestamps).\n\n", tl.started.UTC().Format(time.RFC3339), host)
	b.WriteString("| step | milestone | s |\n|---|---|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %.0f |\n", r.Step, r.Milestone, r.After.Seconds())
	}
	if len(figures) > 0 {
		b.WriteString("\n## Figures\n\n| step | figure | value |\n|---|---|---|\n")
		for _, f := range figures {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", f.Step, f.Name, f.Value)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// watchCreate records a cluster's milestones from the host objects until ctx ends
// or the cluster is Ready.
func watchCreate(ctx context.Context, step string, key client.ObjectKey, start time.Time) {
	seen := map[string]bool{}
	mark := func(name string, ok bool) {
		if ok && !seen[name] {
			seen[name] = true
			s.timeline.add(step, name, time.Since(start))
		}
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		if s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}) == nil {
			running := 0
			for _, vmi := range vmis.Items {
				if vmi.Status.Phase == kubevirtv1.Running {
					running++
				}
			}
			mark("first VM running (the control plane's, unless hosted)", running >= 1)
			mark("all VMs running (2)", running >= 2)
		}
		kcp := &controlplanev1.KubeadmControlPlane{}
		if s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: cluster.ControlPlaneName(key.Name)}, kcp) == nil {
			mark("control plane initialized (kubeadm init)", ptr.Deref(kcp.Status.Initialization.ControlPlaneInitialized, false))
			mark("control plane available (API ready)", meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition))
		}
		machines := &clusterv1.MachineList{}
		if s.host.List(ctx, machines, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}) == nil && len(machines.Items) > 0 {
			joined := 0
			for _, m := range machines.Items {
				if m.Status.NodeRef.IsDefined() {
					joined++
				}
			}
			mark("all nodes joined", joined == len(machines.Items) && joined >= 2)
		}
		nc := &knestv1.NestedCluster{}
		if s.host.Get(ctx, key, nc) == nil && meta.IsStatusConditionTrue(nc.Status.Conditions, knestv1.ReadyCondition) {
			mark("NestedCluster Ready", true)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
