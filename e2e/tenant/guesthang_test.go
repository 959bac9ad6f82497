//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rcuStall is what an emulated guest's kernel prints when a vCPU stops getting
// timer interrupts: under TCG on a 2-core host a control-plane guest now and then
// hangs this way during a boot (docs/e2e.md) while KubeVirt reports it Running.
const rcuStall = "rcu_preempt detected stalls"

// resetHungGuests watches, until ctx ends, the console of each control-plane VM of
// the cluster and deletes a VMI whose guest hung (rcuStall), once per VMI, as the
// README tells an operator to: KubeVirt starts the VM again on the same disks, so
// what the test then asserts (the tenant's objects) still has to hold. Each reset is
// logged and put in the timeline; resets() lists them.
type hangWatch struct {
	mu    sync.Mutex
	reset []string
}

func resetHungGuests(ctx context.Context, key client.ObjectKey, step string, start time.Time) *hangWatch {
	w := &hangWatch{}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		w.reset = append(w.reset, "cannot watch consoles: "+err.Error())
		return w
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		w.reset = append(w.reset, "cannot watch consoles: "+err.Error())
		return w
	}
	done := map[types.UID]bool{}
	go every(ctx, 15*time.Second, func(ctx context.Context) {
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		if s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{"cluster.x-k8s.io/role": "control-plane"}) != nil {
			return
		}
		for i := range vmis.Items {
			vmi := &vmis.Items[i]
			if done[vmi.UID] || vmi.Status.Phase != kubevirtv1.Running {
				continue
			}
			pods := &corev1.PodList{}
			if s.host.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(vmi.UID)}) != nil || len(pods.Items) != 1 {
				continue
			}
			b, err := cs.CoreV1().Pods(key.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "guest-console-log"}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(b), rcuStall) {
				continue
			}
			done[vmi.UID] = true
			what := fmt.Sprintf("%s: the guest hung (%s), its VMI deleted", vmi.Name, rcuStall)
			if err := s.host.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				what += ": " + err.Error()
			}
			s.timeline.add(step, what, time.Since(start))
			w.mu.Lock()
			w.reset = append(w.reset, what)
			w.mu.Unlock()
		}
	})
	return w
}

func (w *hangWatch) resets() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reset...)
}
