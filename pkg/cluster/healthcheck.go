package cluster

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// healthCheck replaces a node that never joins (Options.NodeStartupTimeout), goes
// silent (Ready Unknown: its VM or kubelet died) or stays NotReady; the timeouts are
// generous because nested VMs boot slowly. A node is NotReady from its join until
// its CNI runs, which on an oversubscribed host took more than 5 minutes
// (docs/e2e.md), and replacing it starts the same wait again, so NotReady gets 15; a
// silent node gets 5. Both follow the host (Options.HostSlowdown): a node is also
// silent while its VM reboots, after a host node's drain moved it (KubeVirt starts a
// new VMI elsewhere), and under emulation that reboot took longer than 5 minutes,
// so the health check replaced a machine that was coming back.
// Remediation stops when more than 40% of the group is unhealthy (that is a host
// problem, not a node problem) — but always allows one: CAPI rounds 40% of a group
// of one or two down to zero, so small groups (most tenant pools) would never be
// remediated.
func (r renderer) healthCheck(name, pool string, replicas int32, selector metav1.LabelSelector) *clusterv1.MachineHealthCheck {
	maxUnhealthy := max(1, replicas*2/5)
	slowdown := int32(r.opts.HostSlowdown)
	notReady, silent := 900*slowdown, 300*slowdown
	return &clusterv1.MachineHealthCheck{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("MachineHealthCheck")),
		ObjectMeta: r.meta(name, pool),
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: r.name,
			Selector:    selector,
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr(int32(r.opts.NodeStartupTimeout / time.Second)),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: &notReady},
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: &silent},
				},
			},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyLessThanOrEqualTo: ptr(intstr.FromInt32(maxUnhealthy)),
			}},
		},
	}
}
