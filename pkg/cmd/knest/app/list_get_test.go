package app_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

var spaces = regexp.MustCompile(`\s+`)

// row collapses a table line's spacing so tests do not depend on column widths.
func row(line string) string { return spaces.ReplaceAllString(strings.TrimSpace(line), " ") }

func rows(s string) []string {
	var out []string
	for _, l := range knesttest.Lines(s) {
		out = append(out, row(l))
	}
	return out
}

func TestListAndGet(t *testing.T) {
	g := NewWithT(t)
	ns, other := newNamespace(t), newNamespace(t)

	r := knest(t, "", "list", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.stdout).To(BeEmpty())
	g.Expect(r.stderr).To(ContainSubstring("No clusters found in namespace " + ns))

	g.Expect(knest(t, "", "create", "alpha", "-n", ns, "--wait=false", "--version", "v1.34.3", "--workers", "2", "--pool", "gpu=1").err).To(Succeed())
	g.Expect(knest(t, "", "create", "beta", "-n", ns, "--wait=false", "--version", "v1.33.1").err).To(Succeed())
	g.Expect(knest(t, "", "create", "gamma", "-n", other, "--wait=false").err).To(Succeed())
	setStatus(t, ns, "alpha", func(nc *knestv1.NestedCluster) {
		knesttest.Ready(nc)
		nc.Status.Workers[1].Ready = 0
		nc.Status.Workers[1].Current = 0
		nc.Status.Workers[1].UpToDate = 0
		nc.Status.ControlPlaneReady = "1/1"
		nc.Status.WorkersReady = "2/3"
		nc.Status.Phase = knestv1.PhaseScaling
		nc.Status.KubeconfigSecretName = "alpha-kubeconfig"
		nc.Status.Version = "v1.34.3"
		nc.Status.Conditions[0] = knesttest.Condition(knestv1.ReadyCondition, metav1.ConditionFalse, knestv1.NodesNotReadyReason, "pool gpu: 0 of 1 nodes ready")
		nc.Status.Conditions[2] = knesttest.Condition(knestv1.WorkersReadyCondition, metav1.ConditionFalse, knestv1.ScalingUpReason, "pool gpu: 0 of 1 nodes ready")
	})

	r = knest(t, "", "list", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(rows(r.stdout)).To(HaveLen(3))
	g.Expect(rows(r.stdout)[0]).To(Equal("NAME PHASE VERSION CONTROL PLANE WORKERS ENDPOINT AGE"))
	g.Expect(rows(r.stdout)[1]).To(MatchRegexp(`^alpha Scaling v1\.34\.3 1/1 2/3 https://alpha-lb\.` + ns + `\.svc:6443 \d+s$`))
	g.Expect(rows(r.stdout)[2]).To(MatchRegexp(`^beta <none> v1\.33\.1 0/1 0/1 <none> \d+s$`))

	r = knest(t, "", "list", "-A")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(rows(r.stdout)[0]).To(Equal("NAMESPACE NAME PHASE VERSION CONTROL PLANE WORKERS ENDPOINT AGE"))
	g.Expect(r.stdout).To(And(ContainSubstring(ns+" "), ContainSubstring(other+" ")))
	g.Expect(r.stdout).To(MatchRegexp(other + `\s+gamma\s`))

	r = knest(t, "", "list", "-n", ns, "-o", "name")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.stdout).To(Equal("nestedcluster.knest.dev/alpha\nnestedcluster.knest.dev/beta\n"))

	r = knest(t, "", "list", "-n", ns, "-o", "json")
	g.Expect(r.err).NotTo(HaveOccurred())
	list := &knestv1.NestedClusterList{}
	g.Expect(json.Unmarshal([]byte(r.stdout), list)).To(Succeed())
	g.Expect(list.Kind).To(Equal("List"))
	g.Expect(list.Items).To(HaveLen(2))
	g.Expect(list.Items[0].Kind).To(Equal("NestedCluster"))
	g.Expect(list.Items[0].Status.WorkersReady).To(Equal("2/3"))
	g.Expect(r.stdout).NotTo(ContainSubstring("managedFields"))

	r = knest(t, "", "list", "-n", ns, "-o", "yaml")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(yaml.UnmarshalStrict([]byte(r.stdout), &knestv1.NestedClusterList{})).To(Succeed())

	r = knest(t, "", "list", "-o", "wide")
	g.Expect(r.err).To(MatchError(`unsupported output format "wide": use one of yaml, json, name`))

	// get: a description.
	r = knest(t, "", "get", "alpha", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	out := rows(r.stdout)
	g.Expect(out).To(ContainElements(
		"Name: alpha",
		"Namespace: "+ns,
		"Phase: Scaling",
		"Version: v1.34.3",
		"Endpoint: https://alpha-lb."+ns+".svc:6443",
		"POOL DESIRED READY UP-TO-DATE VERSION CPU MEMORY ROOT DISK IMAGE",
		"control-plane 1 1 1 v1.34.3 2 4Gi ContainerDisk <default>",
		"workers 2 2 2 v1.34.3 2 4Gi ContainerDisk <default>",
		"gpu 1 0 0 v1.34.3 2 4Gi ContainerDisk <default>",
		"Network: pods 10.243.0.0/16, services 10.95.0.0/16, DNS domain tenant.local, CNI flannel",
		"API server: Service type ClusterIP",
		`Kubeconfig: Secret `+ns+`/alpha-kubeconfig (key "value"); knest kubeconfig alpha -n `+ns,
		"TYPE STATUS REASON AGE MESSAGE",
	))
	g.Expect(r.stdout).NotTo(ContainSubstring("Versions:"), "nothing to say when every version is the same")
	g.Expect(r.stdout).To(MatchRegexp(`Ready\s+False\s+NodesNotReady\s+\d+s\s+pool gpu: 0 of 1 nodes ready`))
	g.Expect(r.stdout).To(MatchRegexp(`WorkersReady\s+False\s+ScalingUp\s+\d+s\s+pool gpu: 0 of 1 nodes ready`))

	r = knest(t, "", "describe", "beta", "-n", ns)
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(rows(r.stdout)).To(ContainElements("Phase: <none>", "Kubeconfig: not yet available", "Conditions: none reported yet (is the knest controller running?)"))

	r = knest(t, "", "get", "alpha", "-n", ns, "-o", "yaml")
	g.Expect(r.err).NotTo(HaveOccurred())
	nc := &knestv1.NestedCluster{}
	g.Expect(yaml.UnmarshalStrict([]byte(r.stdout), nc)).To(Succeed())
	g.Expect(nc.Kind).To(Equal("NestedCluster"))
	g.Expect(nc.Status.KubeconfigSecretName).To(Equal("alpha-kubeconfig"))

	r = knest(t, "", "get", "alpha", "beta", "-n", ns, "-o", "json")
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal([]byte(r.stdout), list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))

	r = knest(t, "", "get", "nope", "-n", ns)
	g.Expect(r.err).To(MatchError("cluster nope not found in namespace " + ns))
	g.Expect(r.stderr).To(Equal("ERROR: cluster nope not found in namespace " + ns + "\n"))
}
