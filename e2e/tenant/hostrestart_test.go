//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// The kind host's container engine and node containers (hack/kind/up.sh's env file),
// for TestHostRestart.
const (
	envKindEngine = "KNEST_E2E_KIND_ENGINE"
	envKindNodes  = "KNEST_E2E_KIND_NODES"
)

// TestHostRestart (make e2e-faults) restarts the kind host's node container, as a
// host reboot does: every pod and VM on the host stops and starts again, and the
// node's address may change. A VM-mode tenant (one control plane) and a hosted tenant
// (one worker) must each come back with the object written before, their nodes Ready
// (a worker rejoined or replaced), known as the same cluster; status must never say
// the tenant's state was lost.
func TestHostRestart(t *testing.T) {
	engine, nodes := os.Getenv(envKindEngine), strings.Fields(os.Getenv(envKindNodes))
	if engine == "" || len(nodes) == 0 {
		t.Fatalf("%s and %s are not set: run make e2e-faults, or source the env file hack/kind/up.sh writes", envKindEngine, envKindNodes)
	}
	vm := client.ObjectKey{Namespace: newNamespace(t), Name: "restart-vm"}
	hostedKey := client.ObjectKey{Namespace: newNamespace(t), Name: "restart-hosted"}
	tenants := []struct {
		key   client.ObjectKey
		spec  []string
		nodes int
	}{
		{hostedKey, append(slices.Clone(hostedFlags), "--workers", "1"), 1},
		{vm, []string{"--workers", "0"}, 1},
	}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(vm)
			diagnose(hostedKey)
		}
	})
	const step = "host restarted"

	ok := t.Run("create a hosted and a VM tenant", func(t *testing.T) {
		for _, tn := range tenants {
			ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
			start := time.Now()
			_, err := createCluster(t, ctx, tn.key, tn.spec, "--timeout", createTimeout.String())
			cancel()
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), "knest create %s", tn.key)
			s.timeline.add("create "+tn.key.Name, "knest create returned (Ready)", time.Since(start))
			tc := tenantClient(t, tn.key)
			expectNodesReady(t, tc, tn.nodes)
			expectTenantStateKept(t, tn.key, tc)
		}
	})
	if !ok {
		return
	}

	// make e2e restores a hosted tenant; a VM tenant's restore (its control-plane VM
	// halted and started on the restored disk) is one VM boot too many for CI.
	t.Run("the VM tenant: backup, objects changed, restore: back at the snapshot", func(t *testing.T) {
		expectBackupRestore(t, vm, tenantClient(t, vm), 1)
	})

	t.Run("the host restarted: every tenant back with its objects, its nodes Ready", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		markers := map[client.ObjectKey]*corev1.ConfigMap{}
		for _, tn := range tenants {
			markers[tn.key] = writeStateMarker(t, tenantClient(t, tn.key), "before the host restarted")
		}
		start := time.Now()
		lost := &stateLostWatch{}
		for _, tn := range tenants {
			go lost.watch(ctx, tn.key, step, start)
		}
		defer logResets(t, resetHungGuests(ctx, vm, step, start))
		out, err := exec.CommandContext(ctx, engine, append([]string{"restart"}, nodes...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s restart: %s", engine, out)
		s.timeline.add(step, engine+" restart returned", time.Since(start))
		g.Eventually(func(g Gomega) {
			hostNodes := &corev1.NodeList{}
			g.Expect(s.host.List(ctx, hostNodes)).To(Succeed())
			g.Expect(hostNodes.Items).NotTo(BeEmpty())
			for _, n := range hostNodes.Items {
				g.Expect(n.Status.Conditions).To(ContainElement(And(
					HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "host node %s", n.Name)
			}
		}, createTimeout, poll).Should(Succeed(), "the host's node is not Ready again")
		s.timeline.add(step, "the host's node Ready", time.Since(start))

		for _, tn := range tenants {
			// A new client: a hosted tenant's NodePort is on the node's address, which
			// the restart may have changed.
			tc := tenantClient(t, tn.key)
			s.timeline.add(step, tn.key.Name+": the tenant API answers with the object", expectStateMarker(t, tc, markers[tn.key], start))
			expectNodesReady(t, tc, tn.nodes)
			s.timeline.add(step, fmt.Sprintf("%s: all nodes Ready (%d)", tn.key.Name, tn.nodes), time.Since(start))
			expectTenantStateKept(t, tn.key, tc)
		}
		g.Expect(lost.seen()).To(BeEmpty(), "status said a tenant's state was lost")
	})

	t.Run("delete", func(t *testing.T) {
		for _, tn := range tenants {
			ctx, cancel := context.WithTimeout(t.Context(), deleteTimeout)
			_, err := knestCmd(t, ctx, "delete", tn.key.Name, "-n", tn.key.Namespace, "--timeout", deleteTimeout.String())
			cancel()
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), "knest delete %s", tn.key)
			expectNamespaceEmpty(t, tn.key.Namespace)
		}
	})
}

// stateLostWatch records every time a NestedCluster's TenantState condition is False
// while it polls, and the conditions' changes in the timeline.
type stateLostWatch struct {
	mu   sync.Mutex
	lost []string
}

func (w *stateLostWatch) watch(ctx context.Context, key client.ObjectKey, step string, start time.Time) {
	last := ""
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		nc := &knestv1.NestedCluster{}
		if err := s.host.Get(ctx, key, nc); err == nil {
			var parts []string
			for _, c := range nc.Status.Conditions {
				if c.Status != "True" {
					parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
				}
			}
			now := fmt.Sprintf("%s: phase %s, %s", key.Name, nc.Status.Phase, strings.Join(parts, " "))
			if now != last {
				s.timeline.add(step, now, time.Since(start))
				last = now
			}
			if c := meta.FindStatusCondition(nc.Status.Conditions, knestv1.TenantStateCondition); c != nil && c.Status == "False" {
				w.mu.Lock()
				w.lost = append(w.lost, fmt.Sprintf("%s at %s: %s", key.Name, time.Since(start).Round(time.Second), c.Message))
				w.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *stateLostWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lost)
}
