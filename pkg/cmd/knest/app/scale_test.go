package app_test

import (
	"testing"

	. "github.com/onsi/gomega"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// What knest scale does with a request is pkg/knest's (scale_test.go there); here,
// that the flags make the request and what the command prints.

func TestScaleFlagsMakeTheRequest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "3", "--pool", "gpu=1", "--pool", "tpu=1").err).To(Succeed())

	r := knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--control-plane", "3", "--workers", "2", "--pool", "gpu=0", "--autoscale", "tpu=1:4")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(BeEmpty(), "progress goes to stderr")
	g.Expect(r.stderr).To(ContainSubstring("✓ cluster demo scaling: control plane 1 -> 3, pool workers 3 -> 2, pool gpu 1 -> 0, pool tpu 1 -> auto 1-4"))
	nc := getCluster(g, t.Context(), ns, "demo")
	g.Expect(nc.Spec.ControlPlane.Replicas).To(BeEquivalentTo(3))
	g.Expect(nc.Spec.Workers[0].Replicas).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(nc.Spec.Workers[1].Replicas).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(nc.Spec.Workers[2].Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 4}))

	// A bare MIN:MAX is the default pool; POOL=off turns autoscaling off.
	r = knest(t, "", "scale", "demo", "-n", ns, "--wait=false", "--autoscale", "1:3", "--autoscale", "tpu=off", "--pool", "tpu=2")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stderr).To(ContainSubstring("pool workers 2 -> auto 1-3, pool tpu auto 1-4 -> 2"))
}

func TestScaleRefusesBadFlags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(knest(t, "", "create", "demo", "-n", ns, "--wait=false", "--workers", "2", "--pool", "gpu=1").err).To(Succeed())
	before := getCluster(g, t.Context(), ns, "demo")

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--remove-node", "demo-workers-aaaaa"}, "--remove-node needs the size its pool shrinks to"},
		{[]string{}, "nothing to scale: set --control-plane, --workers, --pool NAME=COUNT or --autoscale POOL=MIN:MAX"},
		{[]string{"--autoscale", "gpu=2:1"}, "--autoscale: autoscale \"gpu=2:1\": the minimum (2) must be at most the maximum (1)"},
		{[]string{"--pool", "gpu"}, `pool "gpu" must look like NAME=COUNT`},
		{[]string{"--workers", "2", "--timeout", "-1s"}, "--timeout must be positive"},
		// Refused by pkg/knest; the command prints it once, as an error.
		{[]string{"--control-plane", "2"}, "the control plane cannot have 2 nodes: it needs 1, 3, 5 or 7"},
	}
	for _, tt := range tests {
		r := knest(t, "", append([]string{"scale", "demo", "-n", ns}, tt.args...)...)
		g.Expect(r.err).To(MatchError(ContainSubstring(tt.want)), "args %v", tt.args)
		g.Expect(r.stderr).To(HavePrefix("ERROR: "), "args %v", tt.args)
	}
	after := getCluster(g, t.Context(), ns, "demo")
	g.Expect(after.Generation).To(Equal(before.Generation))
}
