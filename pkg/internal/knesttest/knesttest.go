// Package knesttest holds the fixtures that the tests of the library (pkg/knest) and
// of the CLI (pkg/cmd/knest/app) share: they run against the test bed of
// internal/testenv and play the knest controller and Cluster API by writing the
// status those would.
package knesttest

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
)

// SyncBuffer is a bytes.Buffer safe to read while a call writes to it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the non-empty lines of s, trimmed.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// NewNamespace creates a tenant namespace named from prefix, deleted when the test
// ends.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := testenv.CreateTenantNamespace(t, c, prefix)
	t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	return ns
}

// SetStatus plays the controller: it writes status onto the NestedCluster.
func SetStatus(t testing.TB, c client.Client, key client.ObjectKey, mutate func(nc *knestv1.NestedCluster)) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		nc := &knestv1.NestedCluster{}
		if err := c.Get(t.Context(), key, nc); err != nil {
			return err
		}
		mutate(nc)
		return c.Status().Update(t.Context(), nc)
	}, 10*time.Second, 50*time.Millisecond).Should(gomega.Succeed())
}

// Condition is a condition that changed now.
func Condition(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

// Ready is the status of a cluster that reached its spec.
func Ready(nc *knestv1.NestedCluster) {
	nc.Status.ObservedGeneration = nc.Generation
	nc.Status.Phase = knestv1.PhaseRunning
	nc.Status.Endpoint = "https://" + nc.Name + "-lb." + nc.Namespace + ".svc:6443"
	n := nc.Spec.ControlPlane.Replicas
	nc.Status.ControlPlane = knestv1.ReplicaStatus{Desired: n, Ready: n, Current: n, UpToDate: n}
	nc.Status.Version = nc.Spec.Version
	nc.Status.Workers = nil
	for _, p := range nc.Spec.Workers {
		n := *p.Replicas
		nc.Status.Workers = append(nc.Status.Workers, knestv1.PoolStatus{Name: p.Name, Version: cluster.PoolVersion(nc, p),
			ReplicaStatus: knestv1.ReplicaStatus{Desired: n, Ready: n, Current: n, UpToDate: n}})
	}
	nc.Status.Conditions = []metav1.Condition{
		Condition(knestv1.ReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
		Condition(knestv1.ControlPlaneReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
		Condition(knestv1.WorkersReadyCondition, metav1.ConditionTrue, knestv1.ReadyReason, ""),
	}
}

// CreateMachine creates a Cluster API Machine of the cluster's pool at version (""
// for none) the way the control plane or a MachineDeployment rendered by knest
// would; it has no Node yet.
func CreateMachine(t testing.TB, c client.Client, ns, clusterName, pool, name, version string, finalizers ...string) {
	t.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName, knestv1.ClusterNameLabel: clusterName, knestv1.PoolNameLabel: pool}
	if pool == knestv1.ControlPlanePool {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	} else {
		labels[clusterv1.MachineDeploymentNameLabel] = cluster.PoolName(clusterName, pool)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Finalizers: finalizers},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName,
			Version:     version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: name,
			},
		},
	}
	gomega.NewWithT(t).Expect(c.Create(t.Context(), m)).To(gomega.Succeed())
}

// JoinNode writes the status of Machine name once its Node, named after the machine
// as CAPK names it, joined; ready also reports the Node Ready at the machine's
// version.
func JoinNode(t testing.TB, c client.Client, ns, name string, ready bool) {
	t.Helper()
	g := gomega.NewWithT(t)
	m := &clusterv1.Machine{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m)).To(gomega.Succeed())
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
	if ready {
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: m.Spec.Version}
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionTrue,
			Reason: "NodeReady", LastTransitionTime: metav1.Now()}}
	}
	g.Expect(c.Status().Update(t.Context(), m)).To(gomega.Succeed())
}
