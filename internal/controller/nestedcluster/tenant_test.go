package nestedcluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
)

// The test bed's own API server plays the tenant: the controller reads its
// kube-system namespace through the kubeconfig Secret, as it reads a real tenant's.
// A control plane that came back blank answers with another kube-system; here the
// recorded one is another's, which is the same disagreement seen from the other side.
func TestBlankControlPlaneIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	nc := testenv.NestedCluster(ns, "blank")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	simulateClusterAPI(g, graph, 1)

	// No kubeconfig yet: nothing known, nothing recorded, still Running.
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
		g.Expect(conditions.Get(nc, knestv1.TenantStateCondition)).To(And(
			HaveField("Status", metav1.ConditionUnknown), HaveField("Message", ContainSubstring("kubeconfig"))))
		g.Expect(nc.Status.TenantID).To(BeEmpty())
	}, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret.Name(nc.Name, secret.Kubeconfig), Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: nc.Name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{secret.KubeconfigDataName: env.Kubeconfig()},
	})).To(Succeed())
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}
	env.Get(g, kubeSystem)
	// The Secret is read uncached and not watched: a touch brings the cluster back
	// sooner than the periodic check.
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "touched", "1") })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.TenantID).To(Equal(string(kubeSystem.UID)))
		g.Expect(conditions.IsTrue(nc, knestv1.TenantStateCondition)).To(BeTrue())
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
	}, timeout, interval).Should(Succeed())

	// Recorded anew until it sticks: a reconcile that read the cluster before the
	// first recording, from a cache behind, may still write the real one back.
	const recorded = "0f6b1f2e-0000-4000-8000-000000000000"
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		if nc.Status.TenantID != recorded {
			nc.Status.TenantID = recorded
			g.Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())
			env.Get(g, nc)
		}
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseFailed))
		g.Expect(conditions.Get(nc, knestv1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", knestv1.StateLostReason), HaveField("Message", ContainSubstring(string(kubeSystem.UID)))))
		g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(knestv1.StateLostReason))
		// The first identity stays: it is what a restore must bring back.
		g.Expect(nc.Status.TenantID).To(Equal(recorded))
	}, timeout, interval).Should(Succeed())
}
