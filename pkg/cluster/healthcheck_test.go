package cluster_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

func TestHealthCheckAlwaysAllowsOneRemediation(t *testing.T) {
	g := NewWithT(t)
	nc := demo()
	nc.Spec.Workers = []knestv1.WorkerPool{
		{Name: "one", Replicas: ptr(int32(1))},
		{Name: "ten", Replicas: ptr(int32(10))},
	}
	cluster.Default(nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	allowed := func(hc *clusterv1.MachineHealthCheck) int {
		return hc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.IntValue()
	}
	g.Expect(allowed(graph.ControlPlaneHealthCheck)).To(Equal(1), "a single control-plane node")
	g.Expect(allowed(graph.Pools[0].HealthCheck)).To(Equal(1), "40% of 1 rounds to 0; one is always allowed")
	g.Expect(allowed(graph.Pools[1].HealthCheck)).To(Equal(4), "40% of 10")
}

// A node that is NotReady (joined, CNI not yet running) gets longer than one that
// went silent: under emulation the CNI took more than 5 minutes to start, and each
// replacement began the same wait again.
func TestHealthCheckWaitsLongerForNotReadyThanForSilent(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, hc := range []*clusterv1.MachineHealthCheck{graph.ControlPlaneHealthCheck, graph.Pools[0].HealthCheck} {
		timeouts := map[corev1.ConditionStatus]int32{}
		for _, c := range hc.Spec.Checks.UnhealthyNodeConditions {
			g.Expect(c.Type).To(Equal(corev1.NodeReady))
			timeouts[c.Status] = *c.TimeoutSeconds
		}
		g.Expect(timeouts).To(Equal(map[corev1.ConditionStatus]int32{corev1.ConditionFalse: 900, corev1.ConditionUnknown: 300}), hc.Name)
		g.Expect(*hc.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(1200)), hc.Name)
	}

	// A slower host gives its machines longer to join (knest controller --node-startup-timeout).
	graph, err = cluster.Render(demo(), cluster.Options{NodeStartupTimeout: 40 * time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	for _, hc := range []*clusterv1.MachineHealthCheck{graph.ControlPlaneHealthCheck, graph.Pools[0].HealthCheck} {
		g.Expect(*hc.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(2400)), hc.Name)
	}
}

// On a host that runs VMs three times slower, a node may be silent or NotReady three
// times as long: a VM rebooting on another host node after a drain is silent for as
// long as it boots.
func TestHealthCheckFollowsTheHost(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{HostSlowdown: 3})
	g.Expect(err).NotTo(HaveOccurred())
	for _, hc := range []*clusterv1.MachineHealthCheck{graph.ControlPlaneHealthCheck, graph.Pools[0].HealthCheck} {
		timeouts := map[corev1.ConditionStatus]int32{}
		for _, c := range hc.Spec.Checks.UnhealthyNodeConditions {
			timeouts[c.Status] = *c.TimeoutSeconds
		}
		g.Expect(timeouts).To(Equal(map[corev1.ConditionStatus]int32{corev1.ConditionFalse: 2700, corev1.ConditionUnknown: 900}), hc.Name)
		g.Expect(*hc.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(int32(3600)), hc.Name)
	}
}
