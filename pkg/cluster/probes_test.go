package cluster_test

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/knest-dev/knest/pkg/cluster"
)

// kubeadmPod is a static pod as kubeadm v1.34 writes it: liveness and startup probes
// on every component, a readiness probe on the API server only.
func kubeadmPod(name string) *corev1.Pod {
	probe := func(p string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: p, Port: intstr.FromString("probe-port")}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, FailureThreshold: 8,
		}
	}
	c := corev1.Container{Name: name, LivenessProbe: probe("/livez"), StartupProbe: probe("/livez")}
	c.StartupProbe.FailureThreshold = 24
	if name == "kube-apiserver" {
		c.ReadinessProbe = probe("/readyz")
		c.ReadinessProbe.PeriodSeconds, c.ReadinessProbe.FailureThreshold = 1, 3
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// The control plane's patches are applied the way kubeadm applies them (strategic
// merge by file name): they change timing only, keep every probe's handler and add
// no probe a component does not have. A component may take as long to start as
// kubeadm waits for it, on a slow host too.
func TestProbePatchesApplyToKubeadmManifests(t *testing.T) {
	for _, slowdown := range []int{1, 3} {
		t.Run(fmt.Sprint("slowdown ", slowdown), func(t *testing.T) {
			testProbePatches(t, slowdown)
		})
	}
}

func testProbePatches(t *testing.T, slowdown int) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{HostSlowdown: slowdown})
	g.Expect(err).NotTo(HaveOccurred())
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	kubeadmWait := *kcs.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds
	dir := kcs.InitConfiguration.Patches.Directory
	g.Expect(kcs.JoinConfiguration.Patches.Directory).To(Equal(dir))

	patched := map[string]*corev1.Pod{}
	for _, f := range kcs.Files {
		if path.Dir(f.Path) != dir {
			continue
		}
		target, ok := strings.CutSuffix(path.Base(f.Path), "+strategic.yaml")
		g.Expect(ok).To(BeTrue(), f.Path)
		orig, err := json.Marshal(kubeadmPod(target))
		g.Expect(err).NotTo(HaveOccurred())
		patch, err := yaml.YAMLToJSON([]byte(f.Content))
		g.Expect(err).NotTo(HaveOccurred(), f.Path)
		out, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.Pod{})
		g.Expect(err).NotTo(HaveOccurred(), f.Path)
		pod := &corev1.Pod{}
		g.Expect(json.Unmarshal(out, pod)).To(Succeed())
		patched[target] = pod
	}
	g.Expect(patched).To(HaveLen(4))

	for target, pod := range patched {
		g.Expect(pod.Spec.Containers).To(HaveLen(1), target)
		c := pod.Spec.Containers[0]
		g.Expect(c.Name).To(Equal(target))
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.StartupProbe} {
			g.Expect(p.HTTPGet).NotTo(BeNil(), target)
			g.Expect(p.TimeoutSeconds).To(BeEquivalentTo(30), target)
		}
		g.Expect(c.LivenessProbe.PeriodSeconds*c.LivenessProbe.FailureThreshold).To(BeEquivalentTo(240), target)
		g.Expect(c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold).To(BeEquivalentTo(600*slowdown), target)
		g.Expect(c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold).To(BeNumerically(">=", kubeadmWait), target)
		if target == "kube-apiserver" {
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			g.Expect(c.ReadinessProbe.PeriodSeconds).To(BeEquivalentTo(10))
		} else {
			g.Expect(c.ReadinessProbe).To(BeNil(), target)
		}
	}
}
