//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tenantStateOnFailure makes a failed test write what the tenant's API shows (nodes,
// pods, the newest events) while the cluster still runs: the suite's diagnose runs
// after the delete, when only the host side is left to look at. Once per test and
// cluster, however many tenant clients the test makes.
func tenantStateOnFailure(t *testing.T, key client.ObjectKey, tc tenant) {
	if _, seen := dumpRegistered.LoadOrStore(dumpKey{t, key}, true); seen {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		path := filepath.Join(s.stateDir, "tenant-"+key.Namespace+"-"+key.Name+".txt")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Logf("tenant state: %v", err)
			return
		}
		defer f.Close()
		var b strings.Builder
		fmt.Fprintf(&b, "===== tenant %s when %s failed (%s) =====\n", key, t.Name(), time.Now().UTC().Format(time.RFC3339))
		writeTenantState(&b, tc)
		_, _ = f.WriteString(b.String())
		fmt.Fprint(os.Stderr, b.String())
		tenantStates.Store(path, true)
	})
}

type dumpKey struct {
	t   *testing.T
	key client.ObjectKey
}

var (
	dumpRegistered sync.Map // dumpKey → true
	tenantStates   sync.Map // path → true: files written, named by diagnose
)

// writeTenantState lists nodes, every pod with why its containers are not running,
// and the last 40 events. A sluggish tenant API gets a minute in all.
func writeTenantState(w io.Writer, tc tenant) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := &corev1.NodeList{}
	if err := tc.List(ctx, nodes); err != nil {
		fmt.Fprintf(w, "nodes: %v\n", err)
	}
	for _, n := range nodes.Items {
		ready := "Unknown"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
			}
		}
		fmt.Fprintf(w, "node %s %s Ready=%s\n", n.Name, n.Status.NodeInfo.KubeletVersion, ready)
	}
	pods := &corev1.PodList{}
	if err := tc.List(ctx, pods); err != nil {
		fmt.Fprintf(w, "pods: %v\n", err)
	}
	for _, p := range pods.Items {
		fmt.Fprintf(w, "pod %s/%s node=%s %s ready=%t\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p))
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(w, "  %s: %s\n", c.Type, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if st := containerTrouble(cs); st != "" {
				fmt.Fprintf(w, "  container %s restarts=%d %s\n", cs.Name, cs.RestartCount, st)
			}
		}
	}
	events := &corev1.EventList{}
	if err := tc.List(ctx, events); err != nil {
		fmt.Fprintf(w, "events: %v\n", err)
	}
	at := func(e corev1.Event) time.Time {
		if !e.LastTimestamp.IsZero() {
			return e.LastTimestamp.Time
		}
		return e.EventTime.Time
	}
	sort.SliceStable(events.Items, func(i, j int) bool { return at(events.Items[i]).Before(at(events.Items[j])) })
	if n := len(events.Items); n > 40 {
		events.Items = events.Items[n-40:]
	}
	for _, e := range events.Items {
		fmt.Fprintf(w, "event %s %s %s %s/%s: %s\n", at(e).UTC().Format(time.TimeOnly), e.Type, e.Reason,
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, strings.TrimSpace(e.Message))
	}
}

// containerTrouble says why a container is not running and ready, or "".
func containerTrouble(cs corev1.ContainerStatus) string {
	switch {
	case cs.State.Waiting != nil:
		return fmt.Sprintf("waiting %s: %s%s", cs.State.Waiting.Reason, cs.State.Waiting.Message, lastExit(cs))
	case cs.State.Terminated != nil:
		return fmt.Sprintf("terminated %s (exit %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
	case !cs.Ready || cs.RestartCount > 0:
		return fmt.Sprintf("running, ready=%t%s", cs.Ready, lastExit(cs))
	}
	return ""
}

func lastExit(cs corev1.ContainerStatus) string {
	if t := cs.LastTerminationState.Terminated; t != nil {
		return fmt.Sprintf("; last exit %d (%s) at %s", t.ExitCode, t.Reason, t.FinishedAt.UTC().Format(time.TimeOnly))
	}
	return ""
}
