package admission_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/autoscaler"
)

// Two tenants share a namespace: the autoscaler of one, with the Role and binding
// knest renders for it, may annotate its own cluster's Machines (how it marks the one
// to remove), not the other's.
func TestAutoscalerFencePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shared-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	apply(t, "config/admission/autoscaler_fence_policy.yaml")

	machine := func(cluster string) *clusterv1.Machine {
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: cluster + "-workers-x"},
			Spec: clusterv1.MachineSpec{
				ClusterName:       cluster,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(string)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine", Name: cluster},
			},
		}
		g.Expect(env.Client.Create(ctx, m)).To(Succeed())
		return m
	}
	own, other := machine("a"), machine("b")
	for _, o := range autoscaler.Render(autoscaler.Input{Cluster: "a", Namespace: ns.Name, MachineDeployments: []string{"a-workers"}}).List()[:3] {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteUserKubeconfig(kubeconfig, "system:serviceaccount:"+ns.Name+":"+autoscaler.Name("a"), "system:serviceaccounts")).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	annotate := func(m *clusterv1.Machine) error {
		cur := &clusterv1.Machine{}
		if err := as.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, clusterv1.DeleteMachineAnnotation, "")
		return as.Update(ctx, cur)
	}
	// The policy takes effect asynchronously.
	g.Eventually(func() error { return annotate(other) }, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(
		"a tenant's cluster-autoscaler may change only its own cluster's Machines; b-workers-x is cluster b's")))
	g.Expect(apierrors.IsForbidden(annotate(other))).To(BeTrue())
	g.Expect(annotate(own)).To(Succeed())
}
